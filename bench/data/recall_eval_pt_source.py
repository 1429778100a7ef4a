"""The authored facts, questions and filler of the Portuguese recall set (see make_recall_eval_pt.py).

Written for caderno: fifteen households talking to their agent about money,
trips, health and work. Each fact is ``(statement, [(kind, question), ...])``
where kind is:

* ``words`` — the question reuses the answer's own words;
* ``paraphrase`` — it says the same thing in other words;
* ``when`` — it asks about what was said at a time; ``{quando}`` becomes the
  day the statement was made ("há duas semanas", "no dia 10 de março").
"""

PERSONAS = {
    "marina-orcamento": [
        (
            "A parcela do financiamento do apartamento agora é R$ 2.380 por mês.",
            [
                ("words", "Qual é a parcela do financiamento do apartamento?"),
                ("paraphrase", "Quanto pago todo mês pela casa própria?"),
            ],
        ),
        (
            "Cancelei a TV a cabo e assinei só streaming, economia de 190 reais.",
            [
                ("paraphrase", "Quanto poupei ao largar a televisão paga?"),
            ],
        ),
        (
            "A conta de luz veio R$ 410 por causa do ar-condicionado.",
            [
                ("words", "Por que a conta de luz veio tão alta?"),
            ],
        ),
        (
            "Decidimos guardar 15% do salário na reserva de emergência, no Tesouro Selic.",
            [
                ("paraphrase", "Onde está aplicado o nosso colchão financeiro?"),
                ("when", "Que percentual de poupança eu combinei {quando}?"),
            ],
        ),
        (
            "O cartão de crédito do Nubank fecha dia 3 e vence dia 10.",
            [
                ("words", "Quando vence o cartão do Nubank?"),
            ],
        ),
        (
            "A mesada das meninas passa a ser 50 reais por semana.",
            [
                ("paraphrase", "Quanto as minhas filhas recebem de dinheiro semanal?"),
            ],
        ),
        (
            "O IPTU deste ano vai ser pago em dez vezes, sem desconto.",
            [
                ("when", "O que eu resolvi {quando} sobre o imposto do imóvel?"),
            ],
        ),
    ],
    "rodrigo-chile": [
        (
            "As passagens para Santiago saíram por R$ 3.100 ida e volta, pela LATAM.",
            [
                ("words", "Quanto custaram as passagens para Santiago?"),
                ("paraphrase", "Qual companhia aérea nos leva ao Chile?"),
            ],
        ),
        (
            "Reservamos um Airbnb em Providencia de 12 a 19 de julho.",
            [
                ("paraphrase", "Em que bairro vamos ficar hospedados na capital chilena?"),
            ],
        ),
        (
            "Quero fazer o passeio ao Valle Nevado, mas só se tiver neve.",
            [
                ("words", "Qual passeio eu quero fazer se tiver neve?"),
            ],
        ),
        (
            "Minha mulher enjoa em estrada de serra, então nada de viagem longa de van.",
            [
                ("paraphrase", "Por que devemos evitar excursões em carro pelas montanhas?"),
            ],
        ),
        (
            "O seguro viagem ficou em 280 reais para os dois, com cobertura de 60 mil dólares.",
            [
                ("when", "Qual foi o valor do seguro que eu falei {quando}?"),
            ],
        ),
        (
            "Precisamos trocar pesos chilenos no aeroporto só para o primeiro dia.",
            [
                ("paraphrase", "Quanto dinheiro local devemos levar na chegada?"),
            ],
        ),
        (
            "A vinícola Concha y Toro fica para o dia 15, com degustação às 11h.",
            [
                ("words", "Que dia vamos à vinícola Concha y Toro?"),
                ("when", "Que visita eu marquei {quando} para o dia 15?"),
            ],
        ),
    ],
    "lucia-saude": [
        (
            "A glicemia da minha mãe em jejum deu 138, o médico aumentou a metformina.",
            [
                ("words", "Quanto deu a glicemia em jejum da minha mãe?"),
                ("paraphrase", "Por que mudaram o remédio de diabetes dela?"),
            ],
        ),
        (
            "A consulta com o cardiologista, Dr. Fausto, é dia 22 às 9h30.",
            [
                ("paraphrase", "Quando ela vai ao médico do coração?"),
            ],
        ),
        (
            "Ela não pode tomar dipirona, teve reação alérgica no ano passado.",
            [
                ("words", "Qual remédio ela não pode tomar por alergia?"),
            ],
        ),
        (
            "O plano de saúde dela subiu para R$ 1.250 por causa da idade.",
            [
                ("paraphrase", "Quanto custa agora o convênio médico da minha mãe?"),
                ("when", "Que aumento eu comentei {quando}?"),
            ],
        ),
        (
            "A fisioterapia do joelho é às terças e quintas na clínica Movimento.",
            [
                ("words", "Em que dias é a fisioterapia do joelho?"),
            ],
        ),
        (
            "Marquei o exame de vista dela para depois do Carnaval.",
            [
                ("when", "O que eu agendei {quando} para depois do Carnaval?"),
            ],
        ),
        (
            "A cuidadora, dona Rosa, vem de segunda a sexta das 8h às 14h.",
            [
                ("paraphrase", "Em que horário a acompanhante fica com a minha mãe?"),
            ],
        ),
    ],
    "andre-trabalho": [
        (
            "A entrega do módulo de faturamento ficou para 30 de abril.",
            [
                ("words", "Qual o prazo de entrega do módulo de faturamento?"),
                ("paraphrase", "Até quando temos que terminar a parte de cobrança do sistema?"),
            ],
        ),
        (
            "O cliente Atlas pediu relatórios em PDF e não em Excel.",
            [
                ("paraphrase", "Em que formato a Atlas quer receber os relatórios?"),
            ],
        ),
        (
            "Minha avaliação de desempenho é na sexta com a Renata, às 16h.",
            [
                ("words", "Quando é a minha avaliação de desempenho?"),
            ],
        ),
        (
            "Combinamos daily às 9h15 e sem reuniões depois das 17h.",
            [
                ("paraphrase", "Até que horas pode ter reunião no time?"),
                ("when", "Que regra de agenda nós combinamos {quando}?"),
            ],
        ),
        (
            "O servidor de homologação cai toda madrugada por falta de memória.",
            [
                ("words", "Por que o servidor de homologação cai de madrugada?"),
            ],
        ),
        (
            "Pedi aumento de 12% e a resposta sai em maio.",
            [
                ("paraphrase", "Quando vou saber se o meu salário vai subir?"),
            ],
        ),
        (
            "O Thiago sai da equipe no fim do mês e a vaga dele não será reposta.",
            [
                ("when", "Que notícia sobre a equipe eu dei {quando}?"),
            ],
        ),
    ],
    "camila-casa-nova": [
        (
            "A entrada do apartamento é de R$ 90 mil e o resto vai pelo FGTS e financiamento da Caixa.",
            [
                ("words", "De quanto é a entrada do apartamento?"),
                ("paraphrase", "Que banco vai financiar o imóvel?"),
            ],
        ),
        (
            "A vistoria do imóvel achou infiltração no banheiro da suíte.",
            [
                ("paraphrase", "Que problema apareceu na inspeção do apartamento?"),
            ],
        ),
        (
            "A mudança está marcada para 5 de agosto com a Transportadora Rápida.",
            [
                ("words", "Quando está marcada a mudança?"),
            ],
        ),
        (
            "O condomínio do prédio novo é R$ 780 e inclui gás.",
            [
                ("paraphrase", "Quanto vamos pagar de taxa mensal do edifício?"),
                ("when", "Que valor de condomínio eu passei {quando}?"),
            ],
        ),
        (
            "Quero sofá retrátil cinza, no máximo 3 mil reais.",
            [
                ("words", "Qual é o limite para o sofá retrátil?"),
            ],
        ),
        (
            "A internet da Vivo só instala dez dias depois da mudança.",
            [
                ("paraphrase", "Quanto tempo vamos ficar sem conexão em casa?"),
            ],
        ),
        (
            "O cartório cobrou R$ 4.600 pela escritura e registro.",
            [
                ("when", "Quanto eu disse {quando} que custou a papelada?"),
            ],
        ),
    ],
    "fernando-impostos": [
        (
            "A declaração do imposto de renda tem que ser entregue até 31 de maio.",
            [
                ("words", "Até quando entrego a declaração do imposto de renda?"),
            ],
        ),
        (
            "Este ano vou usar a declaração completa por causa das despesas médicas.",
            [
                ("paraphrase", "Por que escolhi o modelo com deduções?"),
            ],
        ),
        (
            "A restituição do ano passado foi de R$ 2.870 e caiu no segundo lote.",
            [
                ("words", "De quanto foi a restituição do ano passado?"),
                ("paraphrase", "Quanto o Leão me devolveu da última vez?"),
            ],
        ),
        (
            "A escola da Clara entra como dedução de educação, até o limite.",
            [
                ("paraphrase", "Posso abater a mensalidade escolar da minha filha?"),
            ],
        ),
        (
            "O contador, seu Valdir, cobra 350 para fazer a declaração.",
            [
                ("words", "Quanto o contador cobra pela declaração?"),
                ("when", "Qual o preço do serviço que eu comentei {quando}?"),
            ],
        ),
        (
            "Vendi as ações da Petrobras com lucro e preciso pagar o DARF até o fim do mês.",
            [
                ("paraphrase", "Que guia de imposto tenho que quitar por causa da bolsa?"),
            ],
        ),
        (
            "O informe de rendimentos do banco ainda não chegou.",
            [
                ("when", "Que documento eu disse {quando} que estava faltando?"),
            ],
        ),
    ],
    "beatriz-gravidez": [
        (
            "Estou com 20 semanas e o bebê é uma menina, vai se chamar Alice.",
            [
                ("words", "Qual vai ser o nome da bebê?"),
                ("paraphrase", "De quantos meses eu estava no último ultrassom?"),
            ],
        ),
        (
            "A obstetra, Dra. Helena, pediu o exame de curva glicêmica.",
            [
                ("paraphrase", "Que teste de açúcar a médica do pré-natal pediu?"),
            ],
        ),
        (
            "Não posso comer queijo de leite cru nem carne malpassada.",
            [
                ("words", "Que queijo não posso comer?"),
            ],
        ),
        (
            "O chá de bebê vai ser no salão do prédio dia 18 de outubro.",
            [
                ("paraphrase", "Onde vai ser a festa para ganhar presentes da neném?"),
                ("when", "Que data de festa eu comentei {quando}?"),
            ],
        ),
        (
            "A licença-maternidade começa em dezembro e a empresa estende para seis meses.",
            [
                ("words", "Quando começa a licença-maternidade?"),
            ],
        ),
        (
            "Escolhemos o carrinho da Burigotto, que custa R$ 1.900.",
            [
                ("paraphrase", "Qual modelo de transporte para o bebê decidimos comprar?"),
            ],
        ),
        (
            "Tive azia forte a semana toda e a médica liberou omeprazol.",
            [
                ("when", "Que sintoma eu relatei {quando}?"),
            ],
        ),
    ],
    "pedro-nordeste": [
        (
            "Vamos passar o réveillon em Porto de Galinhas, na pousada Maré Alta.",
            [
                ("words", "Em que pousada vamos ficar em Porto de Galinhas?"),
                ("paraphrase", "Onde vamos virar o ano?"),
            ],
        ),
        (
            "Alugamos um carro em Recife por R$ 1.400 a semana, com seguro.",
            [
                ("paraphrase", "Quanto sai a locação do automóvel na viagem?"),
            ],
        ),
        (
            "Meu filho tem medo de mar aberto, então piscinas naturais só com maré baixa.",
            [
                ("words", "Quando podemos ir às piscinas naturais?"),
            ],
        ),
        (
            "O voo de volta é dia 4 de janeiro às 6h da manhã.",
            [
                ("paraphrase", "A que horas sai o avião para casa?"),
                ("when", "Que horário de voo eu anotei {quando}?"),
            ],
        ),
        (
            "Queremos um dia em Maragogi com o passeio de catamarã.",
            [
                ("words", "Que passeio queremos fazer em Maragogi?"),
            ],
        ),
        (
            "Orçamento total da viagem: 9 mil reais, tudo incluído.",
            [
                ("paraphrase", "Quanto podemos gastar ao todo nas férias no litoral?"),
            ],
        ),
        (
            "Lembrar de levar protetor solar fator 50 e repelente para a criança.",
            [
                ("when", "O que eu pedi {quando} para não esquecer de levar?"),
            ],
        ),
    ],
    "juliana-emprego": [
        (
            "Fiz a entrevista na Natura e o salário oferecido é R$ 9.500 mais PLR.",
            [
                ("words", "Qual salário a Natura ofereceu?"),
                ("paraphrase", "Quanto vou ganhar se aceitar a empresa de cosméticos?"),
            ],
        ),
        (
            "A segunda etapa é um case de marketing para apresentar na quinta.",
            [
                ("paraphrase", "O que tenho que preparar para a próxima fase do processo seletivo?"),
            ],
        ),
        (
            "Não aceito trabalho presencial cinco dias por semana, no máximo dois.",
            [
                ("words", "Quantos dias de trabalho presencial eu aceito?"),
            ],
        ),
        (
            "Minha gestora atual, a Patrícia, prometeu promoção em setembro.",
            [
                ("paraphrase", "O que a minha chefe de agora me ofereceu para eu ficar?"),
                ("when", "Que promessa eu contei {quando}?"),
            ],
        ),
        (
            "O currículo novo destaca o projeto de lançamento da linha vegana.",
            [
                ("words", "Que projeto o currículo novo destaca?"),
            ],
        ),
        (
            "A Ambev também me chamou, mas a vaga é em Jundiaí.",
            [
                ("paraphrase", "Por que a outra cervejaria não me interessa tanto?"),
            ],
        ),
        (
            "Preciso dar a resposta para a Natura até dia 12.",
            [
                ("when", "Qual prazo eu mencionei {quando}?"),
            ],
        ),
    ],
    "ricardo-carro": [
        (
            "A revisão dos 40 mil quilômetros custou R$ 1.150 na concessionária.",
            [
                ("words", "Quanto custou a revisão dos 40 mil quilômetros?"),
                ("paraphrase", "Quanto paguei na última manutenção do veículo?"),
            ],
        ),
        (
            "O seguro do carro vence em março e a Porto Seguro cotou R$ 2.900.",
            [
                ("paraphrase", "Quanto vai sair a renovação da apólice do automóvel?"),
            ],
        ),
        (
            "O IPVA vou pagar à vista em janeiro para ter 3% de desconto.",
            [
                ("words", "Quando vou pagar o IPVA?"),
            ],
        ),
        (
            "Os pneus dianteiros estão carecas, troco no mês que vem.",
            [
                ("paraphrase", "O que está gasto no carro e precisa ser substituído?"),
                ("when", "Que problema eu relatei {quando}?"),
            ],
        ),
        (
            "Levei uma multa de velocidade na Marginal, 130 reais e 4 pontos.",
            [
                ("words", "De quanto foi a multa na Marginal?"),
            ],
        ),
        (
            "Estou pensando em trocar por um carro elétrico, o BYD Dolphin.",
            [
                ("paraphrase", "Que modelo a bateria eu estou considerando?"),
            ],
        ),
        (
            "O carro fica na garagem da firma durante a semana, pago R$ 300.",
            [
                ("when", "Quanto eu disse {quando} que pago de estacionamento?"),
            ],
        ),
    ],
    "tania-pais": [
        (
            "Meu pai começou a tomar losartana de manhã para a pressão.",
            [
                ("words", "Que remédio meu pai toma para a pressão?"),
                ("paraphrase", "Qual medicamento de hipertensão ele usa?"),
            ],
        ),
        (
            "A cirurgia de catarata da minha mãe é dia 9 no Hospital de Olhos.",
            [
                ("paraphrase", "Quando ela opera a vista?"),
            ],
        ),
        (
            "Dividimos os custos dos meus pais entre os três irmãos, 800 para cada um.",
            [
                ("words", "Quanto cada irmão paga dos custos dos pais?"),
            ],
        ),
        (
            "Meu pai caiu no banheiro, vamos instalar barras de apoio.",
            [
                ("paraphrase", "O que vamos colocar para evitar que ele escorregue de novo?"),
                ("when", "Que acidente eu contei {quando}?"),
            ],
        ),
        (
            "A aposentadoria da minha mãe teve reajuste e agora é R$ 2.640.",
            [
                ("words", "De quanto é a aposentadoria da minha mãe agora?"),
            ],
        ),
        (
            "Eles não querem ir para casa de repouso de jeito nenhum.",
            [
                ("paraphrase", "O que meus pais acham de morar num lar de idosos?"),
            ],
        ),
        (
            "A vacina da gripe deles está marcada no posto para sábado.",
            [
                ("when", "O que eu agendei {quando} no posto de saúde?"),
            ],
        ),
    ],
    "gustavo-freela": [
        (
            "Cobro R$ 180 a hora para projetos de front-end.",
            [
                ("words", "Quanto eu cobro a hora de front-end?"),
                ("paraphrase", "Qual é o meu preço por hora como desenvolvedor?"),
            ],
        ),
        (
            "A agência Pixel atrasou o pagamento da nota de fevereiro, R$ 7.200.",
            [
                ("paraphrase", "Quem está me devendo dinheiro?"),
            ],
        ),
        (
            "Abri MEI mas vou ter que migrar para ME porque passei do limite de faturamento.",
            [
                ("words", "Por que vou ter que migrar de MEI para ME?"),
            ],
        ),
        (
            "O contrato com a startup Ligeiro vai até junho, 20 horas por semana.",
            [
                ("paraphrase", "Qual a carga semanal do trabalho com a empresa iniciante?"),
                ("when", "Que contrato eu fechei {quando}?"),
            ],
        ),
        (
            "Separo 20% de tudo que entra para impostos e férias.",
            [
                ("words", "Quanto separo para impostos e férias?"),
            ],
        ),
        (
            "Não pego mais projeto de WordPress, só React.",
            [
                ("paraphrase", "Que tipo de site eu recuso hoje em dia?"),
            ],
        ),
        (
            "Comprei um monitor ultrawide de 3.400 reais para o escritório em casa.",
            [
                ("when", "Que compra para o trabalho eu mencionei {quando}?"),
            ],
        ),
    ],
    "helena-porto": [
        (
            "Vou mudar-me para o Porto em setembro com o visto de procura de trabalho.",
            [
                ("words", "Com que visto vou mudar-me para o Porto?"),
                ("paraphrase", "Quando é que emigro para Portugal?"),
            ],
        ),
        (
            "O T1 em Cedofeita custa 950 euros de renda, com duas rendas de caução.",
            [
                ("paraphrase", "Quanto vou pagar de aluguel no apartamento português?"),
            ],
        ),
        (
            "Tenho de pedir o NIF antes de abrir a conta no banco.",
            [
                ("words", "O que tenho de pedir antes de abrir a conta no banco?"),
            ],
        ),
        (
            "A minha irmã em Braga disse que me empresta o carro nas primeiras semanas.",
            [
                ("paraphrase", "Quem me vai ajudar com transporte quando eu chegar?"),
                ("when", "Que oferta da família eu contei {quando}?"),
            ],
        ),
        (
            "Vou levar as poupanças em euros: 12 mil, para seis meses sem salário.",
            [
                ("words", "Quanto vou levar em poupanças?"),
            ],
        ),
        (
            "A entrevista na Farfetch é por vídeo no dia 3, às 14h de Lisboa.",
            [
                ("paraphrase", "Quando é a conversa com a empresa de moda online?"),
            ],
        ),
        (
            "O gato vai comigo no avião, precisa de microchip e vacina da raiva.",
            [
                ("when", "O que eu disse {quando} sobre o animal de estimação?"),
            ],
        ),
    ],
    "daniel-academia": [
        (
            "Meu objetivo é perder 8 quilos até o casamento do meu irmão em novembro.",
            [
                ("words", "Quantos quilos quero perder até o casamento?"),
                ("paraphrase", "Qual é a minha meta de emagrecimento?"),
            ],
        ),
        (
            "A nutricionista cortou pão branco e liberou tapioca no café da manhã.",
            [
                ("paraphrase", "O que posso comer de manhã no lugar do pãozinho?"),
            ],
        ),
        (
            "Treino musculação às 6h30 antes do trabalho, segunda, quarta e sexta.",
            [
                ("words", "Em que dias treino musculação?"),
            ],
        ),
        (
            "Tenho tendinite no ombro direito, nada de supino pesado.",
            [
                ("paraphrase", "Que exercício de peito devo evitar por causa da lesão?"),
                ("when", "Que dor eu mencionei {quando}?"),
            ],
        ),
        (
            "O exame de sangue mostrou colesterol LDL de 165.",
            [
                ("words", "Quanto deu o colesterol LDL no exame de sangue?"),
            ],
        ),
        (
            "A mensalidade da academia Smart Fit é R$ 129 no plano Black.",
            [
                ("paraphrase", "Quanto pago por mês para malhar?"),
            ],
        ),
        (
            "Pesei 91,4 kg hoje de manhã na balança da farmácia.",
            [
                ("when", "Quanto eu pesava {quando}?"),
            ],
        ),
    ],
    "sara-contas-casal": [
        (
            "Abrimos uma conta conjunta no Inter só para as despesas da casa.",
            [
                ("words", "Em que banco abrimos a conta conjunta?"),
                ("paraphrase", "Onde fica o dinheiro que usamos para as contas do lar?"),
            ],
        ),
        (
            "Cada um deposita proporcional ao salário: eu 45%, o Caio 55%.",
            [
                ("paraphrase", "Como dividimos os gastos entre nós dois?"),
            ],
        ),
        (
            "A fatura do supermercado passou de R$ 1.800 no mês passado.",
            [
                ("words", "Quanto veio a fatura do supermercado?"),
            ],
        ),
        (
            "Combinamos que compras acima de 500 reais precisam ser conversadas antes.",
            [
                ("paraphrase", "A partir de que valor um tem que consultar o outro para gastar?"),
                ("when", "Que regra de gastos combinamos {quando}?"),
            ],
        ),
        (
            "A festa de casamento deixou uma dívida de R$ 14 mil no cheque especial.",
            [
                ("words", "Quanto ficou de dívida no cheque especial?"),
            ],
        ),
        (
            "Vamos quitar primeiro o cheque especial e depois o empréstimo do carro.",
            [
                ("paraphrase", "Qual dívida pagamos antes?"),
            ],
        ),
        (
            "O aluguel sobe 4,6% em outubro pelo IPCA.",
            [
                ("when", "Que reajuste eu avisei {quando}?"),
            ],
        ),
    ],
}

FILLER = [
    ("Bom dia! Tudo certo?", "Bom dia! Tudo ótimo, em que posso ajudar?"),
    ("Me conta uma piada.", "Por que o livro de matemática estava triste? Porque tinha muitos problemas."),
    ("Qual é a capital da Austrália?", "Camberra."),
    ("Valeu, ajudou muito.", "Por nada!"),
    ("Como converto Celsius em Fahrenheit?", "Multiplique por 9/5 e some 32."),
    ("Escreve um poema curto sobre o outono.", "Folhas caem devagar, / o ano vai se deitar."),
    ("Qual é um sinônimo de feliz?", "Alegre, contente, satisfeito."),
    ("Quantos minutos tem um dia?", "1.440 minutos."),
    ("O que é um haicai?", "Um poema de três versos com 5, 7 e 5 sílabas."),
    ("Resume Dom Casmurro numa frase.", "Bentinho conta a história do seu ciúme de Capitu."),
    ("Qual a diferença entre tempo e clima?", "Tempo é o dia a dia; clima é o padrão de longo prazo."),
    ("Uma dica para dormir melhor?", "Horário regular para deitar e nada de tela uma hora antes."),
    ("Como se diz boa noite em espanhol?", "Buenas noches."),
    ("Tomate é fruta?", "Botanicamente sim; na cozinha é tratado como legume."),
    ("Como deixo meus e-mails mais educados?", "Comece com um cumprimento, agradeça e seja claro no pedido."),
    ("Quanto é 15% de 80?", "12."),
    ("Recomenda um podcast de história?", "Experimente o 'Escriba Cafe'."),
    ("Como cozinho um ovo?", "Ferva de 9 a 12 minutos para ficar duro e depois ponha em água fria."),
    ("Que fuso horário é Tóquio?", "Horário do Japão, UTC+9."),
    ("Explica o que é VPN em palavras simples.", "Um túnel privado para o seu tráfego de internet."),
    ("Oi, tudo bem?", "Tudo ótimo! Em que posso ajudar?"),
    ("Qual a previsão do tempo para amanhã?", "Não consigo consultar o tempo, mas posso ajudar com outra coisa."),
    ("Me sugere um alongamento rápido.", "Gire o pescoço, os ombros e faça uma flexão à frente, 30 segundos cada."),
    ("Quantos dias tem um ano bissexto?", "366."),
    ("Qual o plural de cidadão?", "Cidadãos."),
    ("Obrigada, era só isso por hoje.", "Imagina! Até a próxima."),
    ("Como tiro mancha de café da camisa?", "Água fria e um pouco de detergente neutro, sem esfregar demais."),
    ("Que filme leve você indica para o fim de semana?", "'O Auto da Compadecida' é uma boa pedida."),
]

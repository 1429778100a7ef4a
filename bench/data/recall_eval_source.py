"""The authored facts, questions and filler of the recall evaluation set (see make_recall_eval.py)."""

# Authored for caderno's recall benchmark. Each persona: facts as
# (statement, [questions]); questions avoid repeating the statement's wording
# where a person would naturally rephrase.
PERSONAS = {
    "ana-lisbon": [
        (
            "We decided the Lisbon trip will be the second week of May, and the budget is EUR 3000.",
            ["When are we going to Portugal?", "How much money did we set aside for the Lisbon holiday?"],
        ),
        (
            "My sister Carla is allergic to shellfish, so no seafood restaurants when she visits.",
            ["What food can't my sister eat?"],
        ),
        (
            "I switched my gym membership to the one near the office, it costs 45 a month.",
            ["How much is my fitness club now?"],
        ),
        ("Remember that the landlord raises the rent in January by 6 percent.", ["Is the rent going up soon?"]),
        (
            "Our anniversary dinner is booked at Casa Verde for the 14th at 8pm.",
            ["Where are we celebrating the anniversary?"],
        ),
        (
            "I prefer aisle seats on flights, never the window.",
            ["Which seat should you pick when booking my plane ticket?"],
        ),
        (
            "The plumber said the kitchen sink pipe must be replaced before winter.",
            ["What did the repair guy say about the kitchen?"],
        ),
        ("Pedro's school play is on Friday the 21st in the afternoon.", ["When is my son's performance?"]),
    ],
    "bruno-startup": [
        (
            "We closed the seed round at 1.2 million with Northwind Ventures as lead investor.",
            ["Who led our funding round?", "How much did we raise?"],
        ),
        (
            "The launch date for the mobile app moved to March 3rd because of the App Store review.",
            ["When does the phone app go live?"],
        ),
        (
            "Our biggest customer, Helix Logistics, wants single sign-on before renewing.",
            ["What does our largest client need before signing again?"],
        ),
        (
            "I hired Marta as head of design; she starts on the first of February.",
            ["Who is joining to lead the design team?"],
        ),
        (
            "Monthly cloud costs are around 8,400 dollars, mostly the database cluster.",
            ["How much do we spend on servers each month?"],
        ),
        ("Board meetings are the last Thursday of each quarter.", ["How often does the board meet?"]),
        (
            "We agreed to never store customer credit card numbers ourselves, Stripe handles it.",
            ["Do we keep payment card data?"],
        ),
        (
            "The office lease in Pinheiros ends in August and we plan to go fully remote.",
            ["What happens with the office later this year?"],
        ),
    ],
    "carla-garden": [
        (
            "The tomatoes in the back bed get blight every year, so I rotate them to the south bed now.",
            ["Where did I move the tomato plants?"],
        ),
        ("I water the orchids only on Sundays with rainwater.", ["How often do I water the orchids?"]),
        ("The apple tree was grafted in 2019 and is a Gala variety.", ["What kind of apple tree do I have?"]),
        ("Slugs ate all the lettuce last spring; copper tape around the beds worked.", ["What stopped the slugs?"]),
        ("My neighbour Tom lends me his tiller every April.", ["Who can I borrow the soil machine from?"]),
        ("I want to build a greenhouse of about 3 by 4 metres next year.", ["What size is the planned glass house?"]),
        (
            "Compost from the kitchen goes to the black bin; the green bin is only for leaves.",
            ["Which bin do food scraps go in?"],
        ),
        (
            "The roses by the fence are David Austin climbers, pruned in late February.",
            ["When should the climbing roses be cut back?"],
        ),
    ],
    "diego-running": [
        (
            "My goal is to run the Berlin marathon in under 3 hours 30 minutes.",
            ["What finish time am I aiming for?", "Which race am I training for?"],
        ),
        (
            "I injured my left knee in June; the physio said no downhill running for six weeks.",
            ["What did the physiotherapist tell me to avoid?"],
        ),
        ("My long runs are on Saturday mornings along the river.", ["When do I do my longest training sessions?"]),
        ("I use Nike Pegasus shoes and replace them every 700 kilometres.", ["How often should I buy new trainers?"]),
        ("Resting heart rate has dropped to 48 since I started training.", ["What is my pulse at rest now?"]),
        ("Gels with caffeine upset my stomach, so I only take the plain ones.", ["Which energy gels work for me?"]),
        ("Coach Luisa sends the training plan every Sunday night.", ["Who writes my weekly schedule?"]),
        (
            "I signed up for a half marathon in Porto as a tune-up race in August.",
            ["Is there a shorter race before the big one?"],
        ),
    ],
    "elena-baby": [
        ("The baby is due on the 9th of April, and we will find out the sex at birth.", ["When is the due date?"]),
        ("We chose Dr. Farias as obstetrician at Santa Clara hospital.", ["Who is the doctor delivering the baby?"]),
        ("If it's a girl the name is Alice, if a boy we like Tomás.", ["What names did we pick?"]),
        (
            "My iron levels were low, I take a supplement every morning with orange juice.",
            ["Why am I taking pills in the morning?"],
        ),
        (
            "Parental leave at my company is 20 weeks, starting two weeks before the due date.",
            ["How long can I stay home after the birth?"],
        ),
        ("The crib arrives on March 2nd; my brother will assemble it.", ["Who is putting together the baby bed?"]),
        ("Prenatal classes are on Tuesday evenings at 7.", ["When are the pregnancy courses?"]),
        ("We are painting the nursery light green, no pink or blue.", ["What colour will the baby's room be?"]),
    ],
    "felipe-car": [
        ("The car is a 2017 Honda Fit, plate ABC-1234.", ["What car do I drive?", "What is my licence plate?"]),
        (
            "Insurance renews on September 30 with Porto Seguro, premium around 2,100 reais.",
            ["When does the car insurance expire?"],
        ),
        (
            "The mechanic found worn brake pads, replacement costs 480.",
            ["What is wrong with the car and how much to fix it?"],
        ),
        (
            "I only fill up with ethanol when it's below 70 percent of the gasoline price.",
            ["When is it worth using alcohol fuel?"],
        ),
        ("The spare key is in the blue box in the hallway drawer.", ["Where did I leave the extra car key?"]),
        (
            "Parking at work costs 350 a month and I'm thinking of switching to the bus.",
            ["How much do I pay for the garage at the office?"],
        ),
        ("Next oil change is due at 85,000 kilometres.", ["When is the next service?"]),
        ("Remember that the IPVA tax must be paid by March in three instalments.", ["When is the vehicle tax due?"]),
    ],
    "gabi-cooking": [
        (
            "My husband doesn't eat coriander, he says it tastes like soap.",
            ["Which herb should I leave out for my partner?"],
        ),
        (
            "The family lasagna recipe uses 500 g of ricotta and fresh spinach.",
            ["What cheese goes in grandma's lasagne?"],
        ),
        ("I'm vegetarian on weekdays and eat fish on weekends.", ["What is my diet during the week?"]),
        (
            "The oven runs hot, so I always bake 20 degrees lower than the recipe says.",
            ["How should I adjust baking temperatures?"],
        ),
        ("Sourdough starter is fed every 12 hours with rye flour.", ["How do I keep the bread culture alive?"]),
        (
            "For the party on Saturday we expect 18 guests, two of them vegan.",
            ["How many people are coming on the weekend?"],
        ),
        (
            "The good knife set was a wedding gift; never put it in the dishwasher.",
            ["Can the knives go in the machine?"],
        ),
        (
            "We stopped buying from Mercado Azul because the vegetables were often spoiled.",
            ["Why don't we shop at that grocery store anymore?"],
        ),
    ],
    "hugo-move": [
        (
            "We're moving to Curitiba on the 15th of July; the truck is booked with MudaFácil.",
            ["Which company is doing the move?", "What day do we relocate?"],
        ),
        (
            "The new apartment has three bedrooms and the rent is 3,800 including condo fees.",
            ["How much will we pay for the new flat?"],
        ),
        ("The kids start at Colégio Positivo in August.", ["Where will the children study?"]),
        ("Internet must be installed before the 20th because I work from home.", ["Why is the broadband urgent?"]),
        (
            "We are selling the old sofa and the dining table before the move.",
            ["Which furniture are we getting rid of?"],
        ),
        (
            "My mother will stay with us for the first two weeks to help with the boxes.",
            ["Who is coming to help unpack?"],
        ),
        ("The deposit of two months' rent was paid on June 3rd.", ["Did we already pay the security deposit?"]),
        ("Remember to transfer the electricity account to the new address.", ["What utility do I need to change?"]),
    ],
    "iris-books": [
        (
            "My book club reads one classic and one new release every month.",
            ["What kind of books does the club choose?"],
        ),
        (
            "I did not like The Goldfinch; too long and slow in the middle.",
            ["What did I think of that Donna Tartt novel?"],
        ),
        (
            "I want to read all of Ursula Le Guin's Hainish cycle this year.",
            ["Which science fiction series am I working through?"],
        ),
        ("The club meets at Livraria Cultura on the first Wednesday.", ["Where do the readers gather?"]),
        (
            "I lent my copy of Dom Casmurro to Rafael in March and he never returned it.",
            ["Who has my Machado de Assis book?"],
        ),
        ("I prefer paper books; e-readers give me headaches.", ["Do I like reading on a Kindle?"]),
        ("My reading goal is 40 books; I'm at 27 so far.", ["How close am I to my yearly target?"]),
        ("Next month the club picked Pachinko by Min Jin Lee.", ["What is the next book for the group?"]),
    ],
    "joao-finance": [
        (
            "Our monthly income is R$ 14,000 and we try to save 20 percent.",
            ["How much do we earn?", "What share of income do we put aside?"],
        ),
        (
            "The emergency fund should cover six months of expenses, around R$ 48,000.",
            ["How big should the safety reserve be?"],
        ),
        ("We pay the mortgage on the 10th, R$ 2,950 a month until 2041.", ["When is the house loan paid each month?"]),
        (
            "I moved the retirement savings to a Tesouro IPCA bond maturing in 2045.",
            ["Where is my pension money invested?"],
        ),
        ("The credit card closes on the 25th and we never carry a balance.", ["When does the card statement close?"]),
        (
            "We decided to stop the streaming subscriptions except Netflix.",
            ["Which video services do we still pay for?"],
        ),
        (
            "The car loan ends in November; after that the R$ 900 goes to the travel fund.",
            ["What will we do with the money once the vehicle is paid off?"],
        ),
        ("Income tax return is due on May 31 and the accountant is Sérgio.", ["Who files our taxes?"]),
    ],
    "karen-dog": [
        (
            "Our dog Biscuit is a 4-year-old beagle who weighs 13 kilos.",
            ["How heavy is the beagle?", "What breed is Biscuit?"],
        ),
        ("Biscuit's vet is Dr. Amaral, and his vaccines are due in October.", ["When are the shots due?"]),
        (
            "He must not eat grapes or chocolate; he got sick once from raisins.",
            ["Which foods are dangerous for my pet?"],
        ),
        ("The dog walker, Júlia, comes at noon on weekdays for 40 reais.", ["Who walks the dog at lunchtime?"]),
        ("We feed him 180 grams of dry food split into two meals.", ["How much kibble does he get per day?"]),
        (
            "He is scared of fireworks; on New Year's Eve we keep him in the bathroom with music.",
            ["How do we calm him during loud celebrations?"],
        ),
        ("Pet insurance with PetLove costs 89 a month and covers surgery.", ["Is he covered for operations?"]),
        (
            "When we travel, Biscuit stays at Hotel Patas in Vila Madalena.",
            ["Where does the dog stay when we go away?"],
        ),
    ],
    "leo-music": [
        ("I practice guitar 30 minutes every evening and I'm learning fingerstyle.", ["How long do I play each day?"]),
        ("My teacher Ricardo charges 150 per lesson, on Thursdays.", ["How much are the lessons?"]),
        ("The band's gig at Bar do Zé is on the 12th; we play a 45-minute set.", ["When is our next show?"]),
        ("I want to buy a Yamaha acoustic around 2,500, not more.", ["What is my budget for the new instrument?"]),
        ("Our drummer, Kiko, leaves the band in December to move to Lisbon.", ["Who is quitting the group?"]),
        ("I tune a half step down for the Nirvana covers.", ["What tuning do I use for those grunge songs?"]),
        ("The rehearsal studio is booked every Saturday from 2 to 5.", ["When does the band practise?"]),
        ("I recorded the demo at home with a Focusrite interface.", ["What audio gear did I use for the recording?"]),
    ],
    "mara-health": [
        (
            "My blood pressure readings have been around 135 over 85, the doctor wants it below 130.",
            ["What is the target for my pressure?"],
        ),
        ("I'm taking losartan 50 mg every morning since October.", ["What medication am I on?"]),
        ("I'm lactose intolerant, so I use oat milk.", ["Why can't I have regular milk?"]),
        ("The cardiologist appointment is on the 18th at Hospital Sírio.", ["When do I see the heart doctor?"]),
        ("I started walking 8,000 steps a day as the doctor suggested.", ["How much exercise am I doing?"]),
        ("Coffee after 3pm keeps me awake, so I stopped it.", ["Why did I cut the afternoon espresso?"]),
        ("My cholesterol came back at 210; the next test is in six months.", ["What were my lipid results?"]),
        ("I must avoid ibuprofen because of the blood pressure medicine.", ["Which painkiller should I not take?"]),
    ],
    "nina-wedding": [
        (
            "The wedding is on October 18th at Fazenda Santa Rita, with 120 guests.",
            ["Where is the ceremony?", "How many people are invited?"],
        ),
        ("We hired Bia Flores for the flowers; only white and green, no roses.", ["What did we ask the florist?"]),
        (
            "The total budget is R$ 85,000 and the venue took 30,000 of it.",
            ["How much can we spend on the wedding in total?"],
        ),
        ("My dress fitting is on August 9th at the Atelier Lumi.", ["When is my gown appointment?"]),
        ("The band plays bossa nova during dinner and pop after midnight.", ["What music will there be?"]),
        ("Remember: my uncle Paulo cannot sit near my aunt Vera.", ["Which relatives should be seated apart?"]),
        ("Honeymoon is ten days in Patagonia, flights already bought.", ["Where are we going after the wedding?"]),
        ("The cake is carrot with chocolate, from Doce Mel bakery.", ["What flavour is the wedding cake?"]),
    ],
    "otto-home": [
        (
            "The Wi-Fi password is on the sticker under the router; the network is CasaOtto5G.",
            ["What is the wireless network called?"],
        ),
        ("The boiler was serviced in September; next service in a year.", ["When was the heater last checked?"]),
        (
            "The roof leaks above the guest room when it rains from the south.",
            ["Where is water coming into the house?"],
        ),
        (
            "Electricity bills average 320 a month, higher in summer with the air conditioning.",
            ["How much is the power bill?"],
        ),
        ("We want solar panels; the quote from SunPower was 24,000.", ["How much would the photovoltaic system cost?"]),
        ("The cleaner, Dona Lúcia, comes every other Friday.", ["How often does the housekeeper come?"]),
        ("The fuse box is in the garage behind the bicycles.", ["Where is the circuit breaker panel?"]),
        (
            "We decided to repaint the living room grey in the holidays.",
            ["What are we doing to the lounge over the break?"],
        ),
    ],
    "paula-job": [
        (
            "I have a job interview at Nubank on Monday at 10am for a senior data analyst role.",
            ["Which company am I interviewing with?", "What position did I apply for?"],
        ),
        (
            "My current salary is 12,500 and I won't accept less than 15,000.",
            ["What is my minimum salary expectation?"],
        ),
        ("My manager Roberto agreed I can work from home on Wednesdays and Fridays.", ["Which days am I remote?"]),
        (
            "I'm finishing a Coursera course on machine learning by the end of the month.",
            ["What online class am I taking?"],
        ),
        (
            "I don't want to move to another city for work; my kids' school matters more.",
            ["Would I relocate for a new job?"],
        ),
        ("The performance review is in December and I'm hoping for a promotion to lead.", ["When is my evaluation?"]),
        ("I told the recruiter at Itaú I'm not interested this year.", ["Did I reply to the bank's headhunter?"]),
        (
            "My portfolio is on GitHub with the churn prediction project pinned.",
            ["Which project do I show to employers?"],
        ),
    ],
    "rafa-travel": [
        (
            "For Japan we booked the ryokan in Kyoto for three nights from November 4.",
            ["Where do we sleep in Kyoto?", "When do we arrive in Kyoto?"],
        ),
        ("We bought the 14-day JR Pass, it covers the Shinkansen.", ["Which train ticket did we get?"]),
        ("I can't handle raw fish, so no sushi omakase for me.", ["What Japanese food should I avoid?"]),
        (
            "The flight is with Emirates through Dubai, leaving Guarulhos on October 30.",
            ["Which airline are we flying?"],
        ),
        (
            "Travel insurance covers up to 100,000 dollars in medical costs.",
            ["How much medical cover does our policy give?"],
        ),
        ("We want to see Mount Fuji from Hakone if the weather is clear.", ["Where do we hope to view the volcano?"]),
        (
            "The budget for the whole trip is 40,000 reais for two people.",
            ["How much can we spend on the Asia holiday?"],
        ),
        ("My passport expires in February 2027, so it's valid for the trip.", ["Is my travel document still good?"]),
    ],
    "sofia-school": [
        ("Lucas is in third grade at Escola Viva; his teacher is Ms. Renata.", ["Who teaches my son?"]),
        ("He struggles with fractions, so we booked a tutor on Mondays.", ["Which math topic is hard for him?"]),
        ("School fees are R$ 2,700 a month, due on the 5th.", ["How much is the tuition?"]),
        ("Swimming lessons are Tuesdays and Thursdays after school.", ["When does he go to the pool?"]),
        ("Parent-teacher meeting is on the 22nd at 6pm.", ["When do I talk with the teacher?"]),
        ("Lucas is allergic to penicillin; the school nurse has the paperwork.", ["What antibiotic can't he take?"]),
        ("His best friend is Miguel and they carpool on Wednesdays.", ["Who shares rides with us midweek?"]),
        ("We limit tablet time to one hour on school days.", ["How much screen time is allowed?"]),
    ],
    "tiago-freelance": [
        ("I charge 180 an hour for backend work and 150 for maintenance.", ["What is my hourly rate?"]),
        ("Client Acme Foods pays 60 days after invoice, always late.", ["Which customer pays slowly?"]),
        ("I issue invoices through the city portal as MEI, limit 81,000 a year.", ["What is my annual revenue cap?"]),
        (
            "The contract with Loja Bela ends in March and they want to renew for a year.",
            ["Which client wants to extend?"],
        ),
        ("I never work weekends; clients know Friday 6pm is the cutoff.", ["Do I take jobs on Saturdays?"]),
        ("My accountant, Dra. Helena, handles the DAS payment every 20th.", ["Who pays my monthly simplified tax?"]),
        ("I'm saving for a new MacBook Pro, around 18,000.", ["What equipment am I saving for?"]),
        ("The co-working desk at Hub Centro costs 600 a month.", ["How much is the shared office?"]),
    ],
    "vera-parents": [
        ("Dad has type 2 diabetes and takes metformin twice a day.", ["What condition does my father have?"]),
        (
            "Mom's 70th birthday is on June 2nd; we're planning a lunch at her favourite cantina.",
            ["When is mum's birthday celebration?"],
        ),
        ("My parents live in Campinas and I visit every second Sunday.", ["How often do I see my parents?"]),
        ("Dad stopped driving after the eye surgery in May.", ["Why doesn't my father drive anymore?"]),
        ("Their health plan is Unimed, paid from Mom's pension.", ["Which medical insurance do they have?"]),
        ("My brother André covers their groceries, I pay the caregiver.", ["How do we split our parents' costs?"]),
        ("The caregiver, Dona Sônia, works weekdays from 8 to 5.", ["What hours does the home aide work?"]),
        (
            "Mom doesn't like hospitals; she wants appointments at the clinic near home.",
            ["Where does my mother prefer to see doctors?"],
        ),
    ],
    "wagner-pt": [
        (
            "Decidimos que a reforma da cozinha começa em fevereiro, com orçamento de R$ 25 mil.",
            ["Quando começa a obra da cozinha?", "Quanto vamos gastar na reforma?"],
        ),
        ("O pedreiro, seu Antônio, cobra 250 por dia.", ["Quanto custa a diária do pedreiro?"]),
        ("Escolhemos piso porcelanato cinza claro para a cozinha.", ["Que piso vamos colocar?"]),
        ("Minha esposa não quer armários brancos porque mancham fácil.", ["Por que evitamos móveis brancos?"]),
        ("A geladeira nova só cabe se tirarmos a parede da despensa.", ["O que precisa ser derrubado?"]),
        ("Lembra que o síndico exige aviso de obra com dez dias de antecedência.", ["Precisamos avisar o condomínio?"]),
        ("O eletricista vai trocar toda a fiação, que é de 1985.", ["Por que a instalação elétrica vai ser refeita?"]),
        (
            "Durante a obra vamos comer na casa da minha sogra.",
            ["Onde vamos fazer as refeições enquanto a cozinha estiver em obras?"],
        ),
    ],
    "xuxa-pt": [
        ("Meu filho Davi tem consulta no dentista dia 7 às 15h.", ["Quando é o dentista do Davi?"]),
        ("A escola de inglês dele custa R$ 420 por mês.", ["Quanto pago no curso de idiomas?"]),
        (
            "Ele não come nada com glúten desde o diagnóstico de doença celíaca.",
            ["Qual a restrição alimentar do meu filho?"],
        ),
        (
            "O aniversário de 10 anos vai ser num buffet infantil, dia 19 de abril.",
            ["Onde vai ser a festa de dez anos?"],
        ),
        ("Combinamos que videogame só no fim de semana.", ["Quando ele pode jogar no console?"]),
        ("A pediatra é a Dra. Luana, da clínica Crescer.", ["Quem é a médica das crianças?"]),
        ("Ele faz judô às segundas e quartas no clube.", ["Em que dias tem arte marcial?"]),
        ("O uniforme novo precisa ser comprado até o fim do mês.", ["O que preciso comprar para a escola?"]),
    ],
}

FILLER = [
    ("Good morning! How are you today?", "Good morning! All good here, how can I help?"),
    ("Can you tell me a joke?", "Why did the scarecrow win an award? He was outstanding in his field."),
    ("What's the capital of Australia?", "Canberra."),
    ("Thanks, that was helpful.", "You're welcome!"),
    ("How do I convert Celsius to Fahrenheit?", "Multiply by 9/5 and add 32."),
    ("Write a short poem about autumn.", "Leaves fall softly, gold and red, / the year turns slowly toward its bed."),
    ("What's a synonym for happy?", "Joyful, cheerful, content."),
    ("How many minutes are in a day?", "1,440 minutes."),
    ("Remind me what a haiku is.", "A three-line poem with 5, 7 and 5 syllables."),
    (
        "Can you summarise the plot of Hamlet in one line?",
        "A prince avenges his father's murder and nearly everyone dies.",
    ),
    ("What's the difference between weather and climate?", "Weather is day to day; climate is the long-term pattern."),
    ("Give me a tip to sleep better.", "Keep a regular bedtime and avoid screens an hour before."),
    ("Translate 'good night' to Spanish.", "Buenas noches."),
    ("Is a tomato a fruit?", "Botanically yes, culinarily it's treated as a vegetable."),
    (
        "How do I make my emails more polite?",
        "Open with a greeting, say please and thank you, and keep requests clear.",
    ),
    ("What's 15 percent of 80?", "12."),
    ("Recommend a podcast about history.", "Try 'Hardcore History' by Dan Carlin."),
    ("How do you boil an egg?", "Boil for 9 to 12 minutes for hard-boiled, then cool in cold water."),
    ("What time zone is Tokyo in?", "Japan Standard Time, UTC+9."),
    ("Explain what a VPN is in simple words.", "A private tunnel for your internet traffic."),
    ("Oi, tudo bem?", "Tudo ótimo! Em que posso ajudar?"),
    ("Qual a previsão do tempo para amanhã?", "Não consigo consultar o tempo, mas posso ajudar com outra coisa."),
    ("Me conta uma curiosidade.", "Polvos têm três corações."),
    ("Como se escreve 'exceção'?", "Com ç: exceção."),
    ("Valeu pela ajuda!", "Por nada!"),
    ("What's a good name for a goldfish?", "Bubbles, Finn or Goldie."),
    ("How far is the Moon?", "About 384,000 kilometres."),
    (
        "Suggest a quick stretching routine.",
        "Neck rolls, shoulder circles, a forward fold and a hip opener, 30 seconds each.",
    ),
    ("What does 'per se' mean?", "By itself or intrinsically."),
    ("Can you help me name a spreadsheet?", "Something like 'Household Budget 2026'."),
]

import { CadernoAgentMemory, CadernoClient, PreconditionFailedError } from "caderno-client";

const client = new CadernoClient({ baseUrl: process.env.CADERNO_URL ?? "http://127.0.0.1:8765", apiKey: process.env.CADERNO_KEY! });
const memory = new CadernoAgentMemory(client, "casa-gabriel"); // the household port, for one resource
await memory.appendMessages({ threadId: "segunda", resourceId: "casa-gabriel", messages: [{ role: "user", content: "Ganhamos R$ 14.000 por mês." }, { role: "assistant", content: "Anotado." }] });
await memory.updateWorkingMemory({ resourceId: "casa-gabriel", patch: { monthlyIncomeBRL: 14000, activeGoals: [{ name: "Amsterdam", target: "EUR 6000", deadline: "2026-09-01" }] } });
console.log((await memory.getMessages({ threadId: "segunda", limit: 20 })).length, (await memory.getWorkingMemory({ resourceId: "casa-gabriel" }))?.activeGoals);
const { etag } = await client.getWorkingMemory("casa-gabriel"); // compare-and-swap: only if nobody changed it since
try { await client.patchWorkingMemory("casa-gabriel", { savingsRate: 0.3 }, { ifMatch: etag }); }
catch (e) { if (e instanceof PreconditionFailedError) console.log("changed meanwhile: read it again"); else throw e; }
console.log((await client.recall("casa-gabriel", { query: "renda por mês" })).map((hit) => hit.message.content));

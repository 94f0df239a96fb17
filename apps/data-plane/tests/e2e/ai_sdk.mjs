// Reads /v1/chat's UI message stream with the AI SDK's own client: its
// DefaultChatTransport (what useChat uses) posts the conversation as UI
// messages and parses the response into chunks, and readUIMessageStream
// assembles them into the assistant's message. Two turns: the second sends
// the first answer back as the SDK keeps it. Then two turns whose call
// asks for a person's approval: when the SDK reads the approval request,
// this script answers it as a front end would (POST to the run's
// approvals), denying the first and approving the second. Prints one JSON
// object, {"first": UIMessage, "second": UIMessage, "denied": UIMessage,
// "approved": UIMessage, "chunkTypes": [...]}, for
// apps/data-plane/tests/ai_sdk.rs to check.
//
// Environment: DATA_PLANE_URL, USER_TOKEN, SPACE_ID, FIRST_QUESTION,
// SECOND_QUESTION, APPROVAL_QUESTION.

import { DefaultChatTransport, readUIMessageStream } from "ai";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const base = env("DATA_PLANE_URL");
const authorization = "Bearer " + env("USER_TOKEN");
const transport = new DefaultChatTransport({
  api: base + "/v1/chat",
  headers: {
    Authorization: authorization,
    "x-vercel-ai-ui-message-stream": "v1",
  },
  body: { spaceId: env("SPACE_ID") },
});

const chunkTypes = [];

// Answers an approval request of run `runId` as a person would.
async function answer(runId, approvalId, approved) {
  const response = await fetch(`${base}/v1/runs/${runId}/approvals/${approvalId}`, {
    method: "POST",
    headers: { Authorization: authorization, "content-type": "application/json" },
    body: JSON.stringify({ approved, reason: approved ? "fine" : "not that host" }),
  });
  if (!response.ok) throw new Error(`the approval answer got ${response.status}: ${await response.text()}`);
}

// One turn; `approve` (true or false) answers the turn's approval requests.
async function turn(messages, approve) {
  let runId;
  const answers = [];
  const stream = await transport.sendMessages({
    chatId: "chat-e2e",
    messages,
    abortSignal: undefined,
    trigger: "submit-message",
    messageId: undefined,
  });
  const seen = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        chunkTypes.push(chunk.type);
        if (chunk.type === "start") runId = chunk.messageMetadata?.runId ?? runId;
        if (chunk.type === "tool-approval-request") {
          if (approve === undefined) throw new Error("an approval was requested in a turn that expects none");
          answers.push(answer(runId, chunk.approvalId, approve));
        }
        controller.enqueue(chunk);
      },
    }),
  );
  let last;
  for await (const message of readUIMessageStream({
    stream: seen,
    onError: (e) => {
      throw e;
    },
  })) {
    last = message;
  }
  await Promise.all(answers);
  if (!last) throw new Error("the stream assembled no message");
  return structuredClone(last);
}

const question = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });

const messages = [question("q1", env("FIRST_QUESTION"))];
const first = await turn(messages);
messages.push(first, question("q2", env("SECOND_QUESTION")));
const second = await turn(messages);
const denied = await turn([question("q3", env("APPROVAL_QUESTION"))], false);
const approved = await turn([question("q4", env("APPROVAL_QUESTION"))], true);
console.log(JSON.stringify({ first, second, denied, approved, chunkTypes }));

// Reads /v1/chat's UI message stream with the AI SDK's own client: its
// DefaultChatTransport (what useChat uses) posts the conversation as UI
// messages and parses the response into chunks, and readUIMessageStream
// assembles them into the assistant's message. Two turns: the second sends
// the first answer back as the SDK keeps it. Prints one JSON object,
// {"first": UIMessage, "second": UIMessage, "chunkTypes": [...]}, for
// apps/data-plane/tests/ai_sdk.rs to check.
//
// Environment: DATA_PLANE_URL, USER_TOKEN, SPACE_ID, FIRST_QUESTION,
// SECOND_QUESTION.

import { DefaultChatTransport, readUIMessageStream } from "ai";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const transport = new DefaultChatTransport({
  api: env("DATA_PLANE_URL") + "/v1/chat",
  headers: {
    Authorization: "Bearer " + env("USER_TOKEN"),
    "x-vercel-ai-ui-message-stream": "v1",
  },
  body: { spaceId: env("SPACE_ID") },
});

const chunkTypes = [];

async function turn(messages) {
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
  if (!last) throw new Error("the stream assembled no message");
  return structuredClone(last);
}

const question = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });

const messages = [question("q1", env("FIRST_QUESTION"))];
const first = await turn(messages);
messages.push(first, question("q2", env("SECOND_QUESTION")));
const second = await turn(messages);
console.log(JSON.stringify({ first, second, chunkTypes }));

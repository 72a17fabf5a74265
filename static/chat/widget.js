// The sales chat widget: posts the visitor's message to the stream endpoint and shows the answer as it
// arrives (server-sent events read from the fetch body: EventSource cannot POST). The session and its
// token are kept in localStorage, so a reload shows the conversation again, answers finished meanwhile included.
(function () {
  "use strict";

  const root = document.querySelector(".chat");
  const log = document.getElementById("chat-log");
  const statusLine = document.getElementById("chat-status");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  const send = document.getElementById("chat-send");
  const STORAGE_KEY = "salesChatSession";
  const POLL_MS = 1000;

  function loadSession() {
    try {
      const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) || "null");
      if (stored && stored.id && stored.token) return stored;
    } catch (e) { /* unreadable: start a new session */ }
    const fresh = { id: root.dataset.sessionId, token: root.dataset.widgetToken };
    localStorage.setItem(STORAGE_KEY, JSON.stringify(fresh));
    return fresh;
  }

  const session = loadSession();
  const headers = { "X-Chat-Widget-Token": session.token };

  function showStatus(text, kind) {
    statusLine.textContent = text;
    statusLine.className = "chat__status" + (kind === "info" ? " chat__status--info" : "");
    statusLine.hidden = !text;
  }

  function addMessage(role, content, state) {
    const item = document.createElement("li");
    item.className = "chat__message chat__message--" + role + (state ? " chat__message--" + state : "");
    item.dataset.role = role;
    item.textContent = content;
    log.appendChild(item);
    item.scrollIntoView({ block: "end" });
    return item;
  }

  function busy(on) {
    send.disabled = on;
    input.disabled = on;
  }

  async function loadTranscript() {
    const response = await fetch(root.dataset.transcriptUrl + encodeURIComponent(session.id) + "/messages", { headers });
    if (response.status === 404) return { messages: [], answering: false };
    if (!response.ok) throw new Error("transcript " + response.status);
    return response.json();
  }

  async function showTranscript() {
    let transcript;
    try {
      transcript = await loadTranscript();
    } catch (e) {
      showStatus("We could not load this conversation. Please reload the page.");
      return;
    }
    log.replaceChildren();
    for (const message of transcript.messages) {
      const failed = message.state === "failed" && !message.content;
      addMessage(message.role, failed ? "The assistant could not answer this message." : message.content,
        message.state === "complete" ? "" : message.state);
    }
    if (transcript.answering) {
      showStatus("The assistant is still answering…", "info");
      busy(true);
      setTimeout(showTranscript, POLL_MS);
    } else {
      showStatus("");
      busy(false);
    }
  }

  function parseEvent(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    return data.length ? { name, data: JSON.parse(data.join("\n")) } : null;
  }

  async function ask(text) {
    addMessage("user", text);
    const answer = addMessage("assistant", "", "streaming");
    showStatus("");
    let response;
    try {
      response = await fetch(root.dataset.streamUrl, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ sessionId: session.id, message: text }),
      });
    } catch (e) {
      answer.remove();
      showStatus("We could not reach the assistant. Check your connection and try again.");
      return;
    }
    if (!response.ok) {
      answer.remove();
      let message = "The assistant is not available right now.";
      if (response.status === 429) message = "You are sending messages too quickly. Please wait a moment.";
      if (response.status === 400) message = "That message could not be sent. Is it too long?";
      if (response.status === 401) {
        localStorage.removeItem(STORAGE_KEY);
        message = "This conversation has expired. Reload the page to start a new one.";
      }
      showStatus(message);
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let ended = false;
    try {
      while (!ended) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while (!ended && (cut = buffer.indexOf("\n\n")) >= 0) {
          const event = parseEvent(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (!event) continue;  // a keepalive comment
          if (event.name === "token") {
            answer.textContent += event.data.content;
          } else if (event.name === "done") {
            answer.textContent = event.data.content;
            answer.className = "chat__message chat__message--assistant";
            ended = true;
          } else if (event.name === "error") {
            answer.className = "chat__message chat__message--assistant chat__message--" + event.data.state;
            if (!answer.textContent) answer.textContent = "The assistant could not answer this message.";
            showStatus(event.data.message);
            ended = true;
          }
        }
      }
    } catch (e) { /* the connection broke: said below */ }
    if (!ended) {
      answer.className = "chat__message chat__message--assistant chat__message--partial";
      showStatus("The connection was interrupted. Reload the page to see the whole answer.");
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    busy(true);
    try {
      await ask(text);
    } finally {
      busy(false);
      input.focus();
    }
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  busy(true);  // until the transcript is shown: a message sent before would be wiped by it
  showTranscript();
})();

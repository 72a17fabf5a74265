// Follows GET /api/leads/<leadId>/generate-stream. EventSource reconnects by itself with the
// last event id it saw, so a dropped connection continues where it was; a reload starts from the
// number kept in sessionStorage, and the steps already shown are shown again from there.
(function () {
  "use strict";
  const root = document.getElementById("prototype");
  if (!root) return;
  const $ = (name) => root.querySelector(`[data-${name}]`);

  // The preview is framed only on request: V0 may not allow framing, and a link always works.
  $("preview-toggle").addEventListener("click", (event) => {
    const frame = $("preview-frame");
    const showing = frame.hidden;
    if (showing && !frame.src) frame.src = $("preview-link").href;
    frame.hidden = !showing;
    $("preview-hint").hidden = !showing;
    event.currentTarget.setAttribute("aria-expanded", String(showing));
    event.currentTarget.textContent = showing ? "Hide it" : "Show it on this page";
  });
  if (!window.EventSource || ["completed", "failed"].includes(root.dataset.state)) return;
  const storageKey = `prototype-progress:${root.dataset.streamUrl}`;
  const saved = JSON.parse(sessionStorage.getItem(storageKey) || "null") || { lastId: 0, log: [], title: "" };

  function remember(id) {
    saved.lastId = Number(id) || saved.lastId;
    sessionStorage.setItem(storageKey, JSON.stringify(saved));
  }

  function addLog(text) {
    if (!text || saved.log[saved.log.length - 1] === text) return;
    saved.log.push(text);
    if (saved.log.length > 50) saved.log.shift();
    renderLog();
  }

  function renderLog() {
    const list = $("log");
    list.replaceChildren(...saved.log.map((text) => Object.assign(document.createElement("li"), { textContent: text })));
    list.scrollTop = list.scrollHeight;
  }

  function showProgress(data) {
    if (data.title) saved.title = data.title;
    if (saved.title) { $("title").textContent = saved.title; $("title").hidden = false; }
    if (data.status) { $("status").textContent = data.status; addLog(data.status); }
    if (typeof data.step === "number" && data.step > 0) { $("step").textContent = `Step ${data.step}`; $("step").hidden = false; }
  }

  function finish(state) {
    $("spinner").hidden = true;
    $("lead").hidden = true;
    $("heading").textContent = $("heading").dataset[state === "completed" ? "headingCompleted" : "headingFailed"];
    root.dataset.state = state;
    source.close();
  }

  function showComplete(data) {
    $("status").textContent = "Done";
    const link = $("preview-link");
    link.href = data.previewUrl;
    $("done").hidden = false;
    finish("completed");
  }

  function showError(data) {
    $("status").textContent = "Stopped";
    $("failed-message").textContent = data.message || "Something went wrong. Our team will be in touch.";
    $("failed").hidden = false;
    finish("failed");
  }

  renderLog();
  if (saved.title) showProgress({});
  const url = saved.lastId ? `${root.dataset.streamUrl}?lastEventId=${saved.lastId}` : root.dataset.streamUrl;
  const source = new EventSource(url);
  source.addEventListener("progress", (event) => { showProgress(JSON.parse(event.data)); remember(event.lastEventId); });
  source.addEventListener("complete", (event) => { remember(event.lastEventId); showComplete(JSON.parse(event.data)); });
  source.addEventListener("error", (event) => {
    if (event.data) { remember(event.lastEventId); showError(JSON.parse(event.data)); }
    // Without data this is the connection dropping: EventSource retries with Last-Event-ID.
  });
})();

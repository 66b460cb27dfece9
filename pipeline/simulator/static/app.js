// The simulated chat.qwen.ai page: it renders only what the API says (so a reload shows the
// same state as the live page), polls while an answer is being written, and sends messages.
(function () {
  "use strict";

  const CFG = window.__SIM__ || {ui: "current", url_delay: 0.3};
  const LEGACY = CFG.ui === "legacy";
  const V = window.SimView;
  const POLL_MS = 300;
  // After the API says "finished" the page still shows the stop button (and no copy button)
  // for this long (chats.PAGE_SETTLE): completion must be read from the page AND the API.
  const SETTLE_MS = CFG.settle_ms;
  const CHAT_URL = /^\/c\/([a-f0-9-]{20,})$/;
  const GENERIC_ERROR = "Something went wrong, please try again later.";

  const state = {chatId: null, messages: [], finishedSeen: {}, timer: null, sending: false, dead: false};
  // What the next send asks for: the model picker, the thinking toggle, the mode menu.
  const MODELS = CFG.models || [];
  const choice = {model: MODELS.length ? MODELS[0].id : "qwen3.7-plus", thinking: true, mode: ""};
  let ui = null;

  // -- the API ---------------------------------------------------------------------------------
  // Every call carries the frontend's build (`version`), the anti-bot script's `bx-v`, the
  // browser's time zone and a fresh request id, as the autumn-2026 site's frontend does.
  const TIMEZONE = new Date().toString().match(/GMT[+-]\d{4}/) ? new Date().toString().match(/GMT[+-]\d{4}/)[0] : "GMT+0000";
  function requestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, (c) =>
      (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16));
  }

  function call(path, options) {
    const headers = {source: "web", "Content-Type": "application/json", version: CFG.version, "bx-v": CFG.bx_v,
      timezone: TIMEZONE, "x-request-id": requestId()};
    const token = localStorage.getItem("token");
    if (token) headers.Authorization = "Bearer " + token; // as the site's own frontend does
    const init = Object.assign({credentials: "include", headers}, options || {});
    return fetch(path, init);
  }

  async function api(path, options) {
    return parsed(await call(path, options));
  }

  // The late-autumn-2026 page reads a chat's history with XHR, not fetch, and only its last page
  // (`?direction=up&limit=N`): a hook on fetch misses it.
  function xhrJson(path) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("GET", path);
      xhr.withCredentials = true;
      const headers = {source: "web", version: CFG.version, "bx-v": CFG.bx_v, timezone: TIMEZONE,
        "x-request-id": requestId()};
      const token = localStorage.getItem("token");
      if (token) headers.Authorization = "Bearer " + token;
      for (const name in headers) xhr.setRequestHeader(name, headers[name]);
      xhr.onload = () => {
        if (xhr.getResponseHeader("x-actual-status-code") === "404") return resolve({success: false, missing: true});
        try { resolve(JSON.parse(xhr.responseText)); } catch (err) { showForeignPage(xhr.responseText); reject(err); }
      };
      xhr.onerror = () => reject(new Error("network"));
      xhr.send();
    });
  }

  function loadChat(chatId) {
    const path = "/api/v2/chats/" + chatId;
    return CFG.history_limit ? xhrJson(path + "?direction=up&limit=" + CFG.history_limit) : api(path);
  }

  async function parsed(res) {
    const text = await res.text();
    // Some chat-gone answers are HTTP 200 whose real status is this header (the page then shows
    // an empty chat, no banner).
    if (res.headers.get("x-actual-status-code") === "404") return {success: false, missing: true};
    try {
      return JSON.parse(text);
    } catch (err) {
      showForeignPage(text); // a WAF page instead of JSON: the app is gone
      throw new Error("not JSON");
    }
  }

  function showForeignPage(html) {
    state.dead = true;
    clearTimeout(state.timer);
    document.open();
    document.write(html);
    document.close();
  }

  function handleFailure(body) {
    if (body && body.missing) return;
    const data = (body && body.data) || {};
    const ret = (body && Array.isArray(body.ret)) ? body.ret : [];
    if (ret.some((r) => String(r).startsWith("FAIL_SYS_USER_VALIDATE"))) return showSlider(data.url);
    if (data.code === "Unauthorized") location.href = "/auth?action=signin";
    else if (data.code === "FAIL_SYS_USER_VALIDATE") location.href = data.url || "/punish?x5step=1";
    else if (data.code === "CHAT_NOT_FOUND") showBanner(data.details);
    else V.toast(ui.toasts, data.details || GENERIC_ERROR, CFG.toast_seconds);
  }

  // The late-2026 slider: Alibaba's overlay over the page, the captcha in an iframe; the page
  // itself stays (nothing was sent). Solving it (the iframe says so) takes the overlay away.
  function showSlider(url) {
    if (document.getElementById("baxia-dialog-content")) return;
    const mask = document.createElement("div");
    mask.className = "baxia-dialog";
    mask.id = "baxia-dialog";
    const frame = document.createElement("iframe");
    frame.id = "baxia-dialog-content";
    frame.src = url || "/_____tmd_____/punish?action=captcha";
    mask.appendChild(frame);
    document.body.appendChild(mask);
  }

  window.addEventListener("message", (event) => {
    if (event.data !== "qwen-sim-slider-solved") return;
    const mask = document.getElementById("baxia-dialog");
    if (mask) mask.remove();
  });

  function showBanner(text) {
    ui.banner.textContent = text;
    ui.banner.hidden = false;
  }

  // Both API shapes (see the reference) down to one list of turns.
  function normalize(data) {
    const chat = data.chat || {};
    let list = Array.isArray(chat.messages) && chat.messages.length ? chat.messages : null;
    if (!list) {
      const history = chat.history || {};
      const byId = history.messages || {};
      list = [];
      for (let id = history.currentId; id && byId[id]; id = byId[id].parentId) list.unshift(byId[id]);
    }
    return list.map(normalizeMessage);
  }

  function normalizeMessage(m) {
    if (m.role === "user") return {id: m.id, role: "user", content: m.content || ""};
    const phase = (name) => (m.content_list || []).find((item) => item.phase === name);
    const answer = phase("answer");
    const thinking = phase("thinking_summary");
    return {
      id: m.id, role: "assistant", error: m.error || null, candidates: CFG.candidates || 1,
      answer: answer ? answer.content || "" : "", answerStarted: !!answer,
      // Without a status per phase, the message's own (the stream's last) counts for the answer.
      answerStatus: answer ? answer.status || (m.phase === "answer" && m.status) || "typing" : "typing",
      thinking: thinking ? thinking.content : "",
      thinkingDone: thinking ? thinking.status === "finished" : true,
      hasThinking: !!thinking || !answer, // no thinking phase at all: thinking was off
    };
  }

  // -- what the page shows ----------------------------------------------------------------------
  function turnState(message, isLast) {
    if (message.error) return "error";
    if (message.answerStatus !== "finished") return "generating";
    if (!isLast) return "complete";
    const seen = state.finishedSeen[message.id] || (state.finishedSeen[message.id] = Date.now());
    return Date.now() - seen >= SETTLE_MS ? "complete" : "generating";
  }

  function lastAssistant() {
    for (let i = state.messages.length - 1; i >= 0; i--) if (state.messages[i].role === "assistant") return state.messages[i];
    return null;
  }

  function render() {
    const last = lastAssistant();
    for (const message of state.messages) {
      let node = document.getElementById(V.nodeId(LEGACY, message));
      if (!node) {
        node = message.role === "user" ? V.userTurn(LEGACY, message) : V.assistantTurn(LEGACY, message);
        ui.messages.appendChild(V.wrapTurn(node));
      }
      if (message.role === "assistant") {
        V.updateAssistant(LEGACY, node, message, turnState(message, message === last), copyAnswer);
      }
    }
    const lastTurn = last ? turnState(last, true) : "complete";
    if (lastTurn === "error") showBanner(GENERIC_ERROR);
    updateComposer(lastTurn === "generating");
    return lastTurn;
  }

  function updateComposer(generating) {
    const busy = generating || state.sending;
    ui.send.disabled = busy || !ui.input.value.trim();
    if (ui.stop) {
      ui.stop.hidden = !generating;
      ui.send.hidden = generating;
    }
  }

  function copyAnswer(message) {
    if (navigator.clipboard) navigator.clipboard.writeText(message.answer).catch(() => {});
  }

  // -- polling --------------------------------------------------------------------------------
  async function refresh() {
    if (state.dead || !state.chatId) return;
    let body;
    try {
      body = await loadChat(state.chatId);
    } catch (err) {
      if (!state.dead) schedule(POLL_MS * 3); // a network hiccup: keep trying
      return;
    }
    if (!body.success) return handleFailure(body);
    state.messages = normalize(body.data);
    if (Array.isArray(body.data.models) && body.data.models.length) showModel(body.data.models[0]); // a chat keeps its model
    document.title = CFG.ui === "studio-2026-09" ? V.TITLE : body.data.title || V.TITLE;
    const turn = render();
    if (turn === "generating") schedule(POLL_MS);
    else loadChatList();
  }

  function schedule(ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(refresh, ms);
  }

  async function loadChatList() {
    try {
      const body = await api("/api/v2/chats/?page=1&exclude_project=true");
      if (body.success) V.chatList(ui.list, body.data, state.chatId);
    } catch (err) { /* the list is decoration */ }
  }

  // -- sending --------------------------------------------------------------------------------
  async function send() {
    const text = ui.input.value;
    if (!text.trim() || state.sending || ui.send.disabled) return;
    state.sending = true;
    updateComposer(false);
    try {
      await sendText(text);
    } catch (err) {
      if (!state.dead) V.toast(ui.toasts, GENERIC_ERROR, CFG.toast_seconds);
    } finally {
      state.sending = false;
      if (!state.dead) render();
    }
  }

  async function sendText(text) {
    let chatId = state.chatId;
    if (!chatId) {
      const made = await api("/api/v2/chats/new", {method: "POST", body: JSON.stringify({
        title: "New Chat", models: [choice.model], chat_mode: "normal", chat_type: chatType(), timestamp: Date.now(),
      })});
      if (!made.success) return handleFailure(made);
      chatId = made.data.id;
    }
    const previous = state.messages.length ? state.messages[state.messages.length - 1].id : null;
    const res = await call("/api/v2/chat/completions?chat_id=" + chatId, {method: "POST", body: JSON.stringify({
      stream: true, incremental_output: true, chat_id: chatId, chat_mode: "normal", model: choice.model,
      chat_type: chatType(), feature_config: {thinking_enabled: choice.thinking, output_schema: "phase"},
      parent_id: previous, messages: [{role: "user", content: text, chat_type: chatType()}],
      timestamp: Math.floor(Date.now() / 1000),
    })});
    if ((res.headers.get("content-type") || "").includes("text/event-stream")) return readStream(chatId, text, res);
    const reply = await parsed(res);
    if (!reply.success) return handleFailure(reply);
    accepted(chatId, text, reply.data);
    schedule(POLL_MS);
  }

  // The answer as the site streams it (docs/qwen-site.md, "Reading an answer"): the page polls
  // nothing meanwhile. A stream that breaks before its end leaves the chat's JSON to tell.
  async function readStream(chatId, text, res) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "", message = null, finished = false, keptId = null;
    for (;;) {
      let chunk;
      try { chunk = await reader.read(); } catch (err) { break; }
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, {stream: true});
      for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;
          let data;
          try { data = JSON.parse(line.slice(5)); } catch (err) { continue; }
          if (data["response.created"]) {
            // Two candidates may come in one stream (late autumn 2026): the page shows the
            // first (response_index 0) and pages to the other; its frames never join the first's.
            const made = data["response.created"];
            if (keptId !== null) continue;
            keptId = made.response_id;
            accepted(chatId, text, {parent_id: made.parent_id, message_id: made.response_id});
            message = state.messages[state.messages.length - 1];
            message.hasThinking = false;
            message.candidates = CFG.candidates || 1;
          } else if (data.response_id && data.response_id !== keptId) {
            continue; // the other candidate's frame
          } else if (data.error && message) {
            message.error = data.error;
          } else if (data.choices && message) {
            const change = (data.choices[0] || {}).delta || {};
            if (change.phase === "answer") {
              message.answerStarted = message.thinkingDone = true;
              message.answer += change.content || "";
              if (change.status === "finished") { message.answerStatus = "finished"; finished = true; }
            } else if (change.phase !== "thinking_summary") {
              // web_search, search_result and the other tool phases: shown as cards, not text
            } else {
              message.hasThinking = true;
              message.thinking += change.content || "";
              if (change.status === "finished") message.thinkingDone = true;
            }
          }
        }
      }
      if (!state.dead) render();
    }
    if (state.dead) return;
    if (!message || (!finished && !message.error)) return schedule(POLL_MS);
    setTimeout(() => { if (!state.dead) { render(); loadChatList(); } }, SETTLE_MS + 50);
  }

  function accepted(chatId, text, data) {
    state.chatId = chatId;
    ui.input.value = "";
    state.messages.push({id: data.parent_id, role: "user", content: text});
    state.messages.push({id: data.message_id, role: "assistant", error: null, answer: "", answerStarted: false,
      answerStatus: "typing", thinking: "", thinkingDone: false});
    // The address bar shows the chat only a moment after the server took the message.
    const target = "/c/" + chatId;
    if (location.pathname !== target) {
      setTimeout(() => { if (!state.dead) history.pushState({}, "", target); }, CFG.url_delay * 1000);
    }
  }

  async function stop() {
    if (!state.chatId) return;
    try {
      await api("/api/v2/chats/" + state.chatId + "/stop", {method: "POST", body: "{}"});
    } catch (err) { /* polling shows the result */ }
    schedule(0);
  }

  // -- choosing the model and modes --------------------------------------------------------------
  function chatType() {
    return choice.mode === "search" ? "search" : "t2t";
  }

  function showModel(id) {
    const found = MODELS.find((m) => m.id === id);
    choice.model = id;
    if (ui.header && found) ui.header.picker.label.textContent = found.name;
  }

  function wireChoices() {
    if (!ui.header) return; // the legacy UI has no picker and no toggles
    const picker = ui.header.picker;
    picker.trigger.addEventListener("click", () => { picker.list.hidden = !picker.list.hidden; });
    for (const option of picker.options) {
      option.addEventListener("click", () => { showModel(option.dataset.model); picker.list.hidden = true; });
    }
    if (ui.thinkingSelect) wireThinkingSelect(ui.thinkingSelect);
    else ui.thinking.addEventListener("click", () => {
      choice.thinking = !choice.thinking;
      ui.thinking.setAttribute("aria-pressed", String(choice.thinking));
    });
    const mode = ui.mode;
    mode.button.addEventListener("click", () => { mode.dropdown.hidden = !mode.dropdown.hidden; });
    for (const item of mode.items) {
      item.addEventListener("click", () => {
        choice.mode = choice.mode === item.dataset.mode ? "" : item.dataset.mode; // a second click turns it off
        for (const other of mode.items) other.classList.toggle("mode-select-dropdown-item-active", other.dataset.mode === choice.mode);
        mode.button.textContent = choice.mode ? item.textContent : V.MODE_LABEL;
        mode.dropdown.hidden = true;
      });
    }
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      picker.list.hidden = mode.dropdown.hidden = true;
      if (ui.thinkingSelect) openSelect(ui.thinkingSelect, false);
    });
  }

  // The live page's thinking select (Auto / Thinking / Fast) opens on a press of its box. The send
  // says only thinking_enabled: "Fast" is false; "Thinking" and "Auto" are true ("Auto" leaves
  // it to the model whether to think, which this simulator does as "Thinking" does).
  function wireThinkingSelect(select) {
    select.box.addEventListener("mousedown", (event) => {
      event.preventDefault();
      openSelect(select, select.dropdown.classList.contains("ant-select-dropdown-hidden"));
    });
    for (const option of select.options) {
      option.addEventListener("click", () => {
        const name = option.getAttribute("title");
        choice.thinking = name !== "Fast";
        select.shown.textContent = name;
        select.shown.setAttribute("title", name);
        for (const other of select.options) other.classList.toggle("ant-select-item-option-selected", other === option);
        openSelect(select, false);
      });
    }
  }

  function openSelect(select, open) {
    select.dropdown.classList.toggle("ant-select-dropdown-hidden", !open);
    select.combobox.setAttribute("aria-expanded", String(open));
    select.root.classList.toggle("ant-select-open", open);
  }

  // -- start ----------------------------------------------------------------------------------
  // The late-2026 site (docs/qwen-site.md, "Login"): the page trades its session (the cookie)
  // for an access token of a few minutes, and the site hands back a new session with it.
  async function renewSession() {
    const body = await api("/api/v2/auths/refresh");
    if (body && body.success && body.data && body.data.access_token) {
      localStorage.setItem("token", body.data.access_token);
      return true;
    }
    if (body && body.data && body.data.code === "Unauthorized") location.href = "/auth?action=signin";
    return false;
  }

  function start() {
    ui = V.shell(LEGACY);
    if (CFG.ui === "studio-2026-09") document.title = V.TITLE;
    ui.input.addEventListener("input", () => render());
    ui.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send();
      }
    });
    ui.send.addEventListener("click", send);
    if (ui.stop) ui.stop.addEventListener("click", stop);
    wireChoices();
    const match = location.pathname.match(CHAT_URL);
    if (match) {
      state.chatId = match[1];
      refresh();
    } else {
      loadChatList();
    }
    if (!match && location.pathname.startsWith("/c/") && location.pathname !== "/c/local") {
      showBanner("Invalid input chat parent_id " + location.pathname.slice(3) + " is not exist");
    }
    render();
  }

  if (CFG.rotating) renewSession().then((ok) => { if (ok) start(); });
  else start();
})();

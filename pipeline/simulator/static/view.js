// The DOM of the UI generations (see docs/qwen-site.md and chats.py UIS). app.js decides what the
// chat is doing; this file only knows how each generation shows it.
(function () {
  "use strict";

  function h(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function shell(legacy) {
    const app = document.getElementById("app");
    const list = h("div", {class: "chat-history-list"});
    const sidebar = LIVE ? liveSidebar(list)
      : h("div", {class: "sidebar"}, [h("a", {class: "new-chat-button", href: "/", text: "New Chat"}), list]);
    const banner = h("div", {class: "chat-error-banner", role: "alert"});
    banner.hidden = true;
    const messages = h("div", {class: "chat-messages", id: "chat-messages"});
    const parts = legacy ? legacyComposer() : currentComposer();
    const top = legacy ? [] : [parts.header];
    const main = h("div", {class: "chat-container"}, [...top, banner, messages, parts.container]);
    const toasts = h("div", {class: "toast-container"});
    app.append(sidebar, main, toasts);
    return Object.assign({list, banner, messages, toasts}, parts);
  }

  const UI = (window.__SIM__ || {}).ui || "";
  // The late-2026 markup (see chats.py UIS): other send/stop buttons, a copy button hidden until hover.
  // The live markup (captured on 2026-08-09) has them too, and a thinking select for the toggle.
  // "studio-2026-09": the live page rebranded "Qwen Studio" (late September 2026): each turn inside
  // .qwen-chat-message-select-turn / -select-turn-message wrappers (a broad [class*=chat-message]
  // counts a turn up to three times), tool cards whose class says "thinking" but that are not the
  // reasoning, a "1/2" pager over two candidate answers, the composer's placeholder "Ask Qwen".
  const STUDIO = UI === "studio-2026-09";
  const LIVE = UI === "live-2026-08" || STUDIO;
  const LATE = UI === "late-2026" || LIVE;

  // The live page's sidebar: a "New Chat" control, a "Search Chats" box, the chat list, the user menu.
  function liveSidebar(list) {
    return h("div", {class: "sidebar"}, [
      h("a", {class: "new-chat-button", href: "/", "aria-label": "New Chat", text: "New Chat"}),
      h("input", {class: "sidebar-search", type: "text", placeholder: "Search Chats", "aria-label": "Search Chats"}),
      list,
      h("button", {class: "user-menu-btn", type: "button", "aria-label": "User menu", text: "Me"}),
    ]);
  }

  function currentComposer() {
    const placeholder = LIVE && !STUDIO ? "How can I help you today?" : "Ask Qwen";
    const input = h("textarea", {class: "message-input-textarea", placeholder, rows: "2"});
    const buttonClass = (name) => (LATE ? "omni-button-content" : name);
    const send = h("button", {class: buttonClass("send-button"), type: "button", "aria-label": "Send", text: "\u2191"});
    const stop = h("button", {class: buttonClass("stop-button"), type: "button", "aria-label": "Stop", text: "\u25A0"});
    send.disabled = true;
    stop.hidden = true;
    const buttons = LATE
      ? [h("div", {class: "message-input-right-button"}, [h("div", {class: "message-input-right-button-send"}, [send, stop])])]
      : [send, stop];
    const box = h("div", {class: "message-input-container"}, [input, ...buttons]);
    const mode = modeMenu();
    if (LIVE) {
      const select = thinkingSelect();
      const tools = h("div", {class: "message-input-toolbar"}, [mode.root, select.root]);
      const container = h("div", {class: "chat-layout-input-container"}, [box, tools]);
      return {container, input, send, stop, header: modelPicker(), thinkingSelect: select, mode};
    }
    const thinking = h("button", {class: "chat-input-feature-btn", type: "button", "aria-label": "Thinking",
      "aria-pressed": "true", text: "Thinking"});
    const tools = h("div", {class: "message-input-toolbar"}, [thinking, mode.root]);
    const container = h("div", {class: "chat-layout-input-container"}, [box, tools]);
    return {container, input, send, stop, header: modelPicker(), thinking, mode};
  }

  // The live page's thinking control: an Ant Design select. Its box shows the chosen option beside
  // an (empty) combobox input; its options are drawn in a dropdown at the end of the document.
  const THINKING_OPTIONS = ["Auto", "Thinking", "Fast"];

  function thinkingSelect() {
    const combobox = h("input", {role: "combobox", "aria-label": "Thinking", class: "ant-select-selection-search-input",
      readonly: "", autocomplete: "off", "aria-haspopup": "listbox", "aria-expanded": "false",
      "aria-controls": "rc_select_thinking_list"});
    const shown = h("span", {class: "ant-select-selection-item", title: THINKING_OPTIONS[0], text: THINKING_OPTIONS[0]});
    const box = h("div", {class: "ant-select-selector"}, [h("span", {class: "ant-select-selection-search"}, [combobox]), shown]);
    const root = h("div", {class: "ant-select ant-select-single thinking-select"}, [box, h("span", {class: "ant-select-arrow", text: "\u25BE"})]);
    const options = THINKING_OPTIONS.map((name) => h("div", {class: "ant-select-item ant-select-item-option", title: name,
      role: "option"}, [h("div", {class: "ant-select-item-option-content", text: name})]));
    const dropdown = h("div", {class: "ant-select-dropdown ant-select-dropdown-hidden", id: "rc_select_thinking_list"}, [
      h("div", {class: "rc-virtual-list"}, options)]);
    document.body.appendChild(dropdown);
    return {root, box, combobox, shown, dropdown, options};
  }

  // The header's model picker: a trigger naming the chosen model, and its list (a sibling, shown
  // while open). Each option's first line is the model's name, the second a description.
  function modelPicker() {
    const models = (window.__SIM__ && window.__SIM__.models) || [];
    const label = h("span", {class: "model-selector-text", text: models.length ? models[0].name : ""});
    const trigger = h("div", {class: "ant-dropdown-trigger model-selector", role: "button",
      "aria-label": "Select Model"}, [label, h("span", {class: "model-selector-arrow", text: "\u25BE"})]);
    const options = models.map((m) => h("div", {role: "option", class: "model-item", "data-model": m.id,
      "data-name": m.name}, [h("div", {class: "model-item-name", text: m.name}),
      h("div", {class: "model-item-desc", text: "A simulated model"})]));
    const list = h("div", {role: "listbox", class: "model-list"}, options);
    list.hidden = true;
    const left = h("div", {id: "qwen-chat-header-left"}, [trigger, list]);
    const header = h("div", {class: "chat-header"}, [left]);
    Object.assign(header, {picker: {trigger, label, list, options}});
    return header;
  }

  // The mode menu: its label names the chosen mode; the dropdown lists the modes. The live page's
  // is its "+" menu, without web search.
  const MODES = LIVE
    ? [["upload", "Upload attachment"], ["research", "Deep Research"], ["image", "Create Image"],
      ["video", "Create Video"], ["webdev", "Web Dev"], ["slides", "Slides"], ["more", "More"], ["tools", "Tools"]]
    : [["search", "Web Search"], ["research", "Deep Research"]];

  const MODE_LABEL = LIVE ? "+" : "Mode";

  function modeMenu() {
    const button = h("div", {class: "mode-select-open", role: "button", text: MODE_LABEL});
    const items = MODES.map(([mode, text]) =>
      h("div", {class: "mode-select-dropdown-item", role: "menuitem", "data-mode": mode, text}));
    const dropdown = h("div", {class: "mode-select-dropdown"}, items);
    dropdown.hidden = true;
    return {root: h("div", {class: "mode-select"}, [button, dropdown]), button, dropdown, items};
  }

  function legacyComposer() {
    const input = h("textarea", {id: "chat-input", placeholder: "Send a Message", rows: "2"});
    const send = h("button", {id: "send-message-button", type: "button", text: "Send"});
    send.disabled = true;
    return {container: h("div", {id: "message-input-container"}, [input, send]), input, send, stop: null};
  }

  function nodeId(legacy, message) {
    if (legacy) return (message.role === "user" ? "user-message-" : "chat-response-message-") + message.id;
    return "qwen-chat-message-" + message.role + "-" + message.id;
  }

  function userTurn(legacy, message) {
    const id = nodeId(legacy, message);
    if (legacy) return h("div", {class: "user-message", id}, [h("div", {class: "user-message-content", text: message.content})]);
    return h("div", {class: "qwen-chat-message qwen-chat-message-user", id}, [
      h("div", {class: "chat-user-message", text: message.content}),
    ]);
  }

  function assistantTurn(legacy, message) {
    const id = nodeId(legacy, message);
    if (legacy) return h("div", {class: "chat-response-message", id}, [h("div", {class: "response-message-content markdown-prose"})]);
    return h("div", {class: "qwen-chat-message qwen-chat-message-assistant", id});
  }

  // The thinking block stays once thinking is over (collapsed, "Thinking completed"); only the
  // Skip control says that thinking is still going on.
  function updateThinking(node, message) {
    let block = node.querySelector(".phase-thinking");
    if (!block) {
      block = h("div", {class: "response-message-content phase-thinking"}, [
        h("div", {class: "thinking-header"}, [h("span", {class: "thinking-label"})]),
        h("div", {class: "thinking-content"}),
      ]);
      node.prepend(block);
    }
    block.querySelector(".thinking-label").textContent = message.thinkingDone ? "Thinking completed" : "Thinking...";
    block.querySelector(".thinking-content").textContent = message.thinking;
    block.classList.toggle("collapsed", message.thinkingDone || block.dataset.skipped === "1");
    let skip = block.querySelector(".thinking-skip-button");
    if (!message.thinkingDone && !skip) {
      skip = h("button", {class: "thinking-skip-button", type: "button", text: "Skip"});
      skip.addEventListener("click", () => { block.dataset.skipped = "1"; block.classList.add("collapsed"); });
      block.querySelector(".thinking-header").appendChild(skip);
    } else if (message.thinkingDone && skip) {
      skip.remove();
    }
  }

  function setMarkdown(target, raw) {
    if (target.dataset.raw === raw) return;
    target.dataset.raw = raw;
    target.innerHTML = window.renderMarkdown(raw);
  }

  function updateAnswer(legacy, node, message) {
    if (legacy) return setMarkdown(node.querySelector(".response-message-content"), message.answer);
    if (!message.answerStarted) return;
    let block = node.querySelector(".phase-answer");
    if (!block) {
      block = h("div", {class: "response-message-content phase-answer"}, [h("div", {class: "qwen-markdown"})]);
      node.insertBefore(block, node.querySelector(".message-footer"));
    }
    setMarkdown(block.querySelector(".qwen-markdown"), message.answer);
  }

  function updateFooter(node, message, turn, onCopy) {
    const complete = turn === "complete";
    let copy = node.querySelector(".copy-response-button");
    if (complete && !copy) {
      copy = h("button", {class: "copy-response-button", type: "button", "aria-label": "Copy", text: "Copy"});
      copy.addEventListener("click", () => onCopy(message));
      const footer = LATE ? "message-footer response-message-footer response-message-footer-none" : "message-footer";
      node.appendChild(h("div", {class: footer}, [copy]));
    } else if (!complete && copy) {
      copy.parentElement.remove();
    }
    const error = node.querySelector(".qwen-chat-message-error");
    if (turn === "error" && !error) {
      node.appendChild(h("div", {class: "qwen-chat-message-error", text: message.error.details || "Something went wrong"}));
    }
  }

  // The Studio page's wrappers around a turn's own node (the node itself elsewhere).
  function wrapTurn(node) {
    if (!STUDIO) return node;
    return h("div", {class: "qwen-chat-message-select-turn"}, [
      h("div", {class: "qwen-chat-message-select-turn-message"}, [node])]);
  }

  // The Studio page's tool cards (the search before the answer): "thinking" in their class, and
  // not the reasoning. And the pager over two candidate answers.
  function updateStudio(node, message) {
    if (!STUDIO || !message.answerStarted || node.querySelector(".qwen-chat-thinking-tool-status-card-wraper")) return;
    const card = (text) => h("div", {class: "qwen-chat-thinking-tool-status-card-wraper"}, [
      h("span", {class: "qwen-chat-thinking-tool-status-card-title", text})]);
    node.insertBefore(card("Searched 2 web pages"), node.querySelector(".phase-answer"));
    node.insertBefore(card("Read 1 page"), node.querySelector(".phase-answer"));
    if (message.candidates > 1) {
      node.appendChild(h("div", {class: "qwen-chat-message-pager"}, [h("span", {text: "1/" + message.candidates})]));
    }
  }

  function updateAssistant(legacy, node, message, turn, onCopy) {
    if (!legacy && message.hasThinking !== false) updateThinking(node, message);
    updateAnswer(legacy, node, message);
    updateStudio(node, message);
    updateFooter(node, message, turn, onCopy);
  }

  function chatList(container, items, activeId) {
    const live = LIVE ? {class: "chat-item chat-item-drag-link", "aria-label": "chat-item"} : {class: "chat-item"};
    container.replaceChildren(...items.map((item) => h("a", Object.assign({}, live, {
      class: live.class + (item.id === activeId ? " active" : ""), href: "/c/" + item.id,
    }), [h("span", {class: "chat-item-title", text: item.title})])));
  }

  function toast(container, text, seconds) {
    const node = h("div", {class: "qwen-toast error-toast", role: "alert", text});
    container.appendChild(node);
    // Toasts go away by themselves, as on the real site: a slow reader can miss them.
    setTimeout(() => node.remove(), (seconds === undefined ? 10 : seconds) * 1000);
  }

  window.SimView = {shell, nodeId, userTurn, assistantTurn, wrapTurn, updateAssistant, chatList, toast, MODE_LABEL,
    TITLE: STUDIO ? "Qwen Studio" : "Qwen Chat"};
})();

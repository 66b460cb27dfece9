// A small markdown renderer: enough for the simulator's answers (headings, paragraphs, lists,
// fenced code, block quotes, **bold**, *italic*, `code`). Partial text (mid-stream) must render
// too: an unclosed fence runs to the end. Code blocks get a header with the language and a
// "Copy" label, as on the real site, so scraping innerText is not the same as the markdown.
(function () {
  "use strict";

  function esc(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function inline(text) {
    return text.split(/(`[^`]+`)/).map((part) => {
      if (part.length > 1 && part.startsWith("`") && part.endsWith("`")) {
        return "<code>" + esc(part.slice(1, -1)) + "</code>";
      }
      return esc(part)
        .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
        .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
    }).join("");
  }

  const FENCE = /^```\s*([\w+-]*)\s*$/;
  const HEADING = /^(#{1,6})\s+(.*)$/;
  const BULLET = /^\s*[-*+]\s+(.*)$/;
  const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;
  const QUOTE = /^>\s?(.*)$/;

  function startsBlock(line) {
    return FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || NUMBERED.test(line) || QUOTE.test(line);
  }

  function codeBlock(lang, code) {
    const label = lang || "text";
    return '<div class="qwen-markdown-code"><div class="qwen-markdown-code-header">' +
      '<span class="qwen-markdown-code-lang">' + esc(label) + "</span>" +
      '<span class="qwen-markdown-code-copy">Copy</span></div>' +
      '<pre><code class="language-' + esc(label) + '">' + esc(code) + "</code></pre></div>";
  }

  function collect(lines, i, pattern) {
    const items = [];
    while (i < lines.length && pattern.test(lines[i])) {
      items.push(lines[i].match(pattern)[1]);
      i++;
    }
    return [items, i];
  }

  function renderMarkdown(src) {
    const lines = String(src || "").split("\n");
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = line.match(FENCE))) {
        const code = [];
        i++;
        while (i < lines.length && !/^```\s*$/.test(lines[i])) code.push(lines[i++]);
        i++; // the closing fence (or past the end)
        out.push(codeBlock(m[1], code.join("\n")));
      } else if ((m = line.match(HEADING))) {
        const level = m[1].length;
        out.push("<h" + level + ">" + inline(m[2]) + "</h" + level + ">");
        i++;
      } else if (BULLET.test(line) || NUMBERED.test(line)) {
        const ordered = !BULLET.test(line);
        let items;
        [items, i] = collect(lines, i, ordered ? NUMBERED : BULLET);
        const tag = ordered ? "ol" : "ul";
        out.push("<" + tag + ">" + items.map((t) => "<li>" + inline(t) + "</li>").join("") + "</" + tag + ">");
      } else if (QUOTE.test(line)) {
        let items;
        [items, i] = collect(lines, i, QUOTE);
        out.push("<blockquote><p>" + inline(items.join(" ")) + "</p></blockquote>");
      } else if (!line.trim()) {
        i++;
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) para.push(lines[i++]);
        out.push("<p>" + inline(para.join("\n")).replace(/\n/g, "<br>") + "</p>");
      }
    }
    return out.join("\n");
  }

  window.renderMarkdown = renderMarkdown;
})();

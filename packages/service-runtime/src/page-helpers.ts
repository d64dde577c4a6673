/**
 * Browser-side helpers the service pages share (the approval page, the run timeline), spliced into each page's
 * script inside its function scope: `el` builds an element with its text (never HTML), `appendJson` prints a
 * value as `JSON.stringify(value, null, 2)` would, one node per token, with every `REDACTED` value masked and
 * its JSON pointer collected, and `fact` appends a `<dt>`/`<dd>` pair. The page defines `REDACTED` (the
 * placeholder) and `MASKED_TITLE` (the masked value's tooltip).
 */
export const PAGE_DOM_HELPERS = `  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function pointerOf(path, key) { return path + "/" + String(key).replace(/~/g, "~0").replace(/\\//g, "~1"); }

  /**
   * Appends \`value\` as JSON.stringify(value, null, 2) would print it, one text node per token so keys, values and
   * masked fields can be styled; redacted values are shown as masked and their pointers collected in \`masked\`.
   */
  function appendJson(parent, value, indent, path, masked) {
    if (value === REDACTED) {
      masked.push(path || "/");
      var hidden = el("span", "masked", "hidden: sensitive");
      hidden.title = MASKED_TITLE;
      parent.appendChild(hidden);
      return;
    }
    if (value === null || typeof value !== "object") {
      parent.appendChild(el("span", typeof value === "string" ? "j-str" : "j-lit", JSON.stringify(value)));
      return;
    }
    var array = Array.isArray(value);
    var keys = array ? value.map(function (_, i) { return i; }) : Object.keys(value);
    if (keys.length === 0) { parent.appendChild(document.createTextNode(array ? "[]" : "{}")); return; }
    var inner = indent + "  ";
    parent.appendChild(document.createTextNode(array ? "[\\n" : "{\\n"));
    keys.forEach(function (key, i) {
      parent.appendChild(document.createTextNode(inner));
      if (!array) {
        parent.appendChild(el("span", "j-key", JSON.stringify(key)));
        parent.appendChild(document.createTextNode(": "));
      }
      appendJson(parent, value[key], inner, pointerOf(path, key), masked);
      parent.appendChild(document.createTextNode(i < keys.length - 1 ? ",\\n" : "\\n"));
    });
    parent.appendChild(document.createTextNode(indent + (array ? "]" : "}")));
  }

  function argumentsBlock(approval) {
    var box = el("section", "args");
    box.appendChild(el("h3", "", "Arguments"));
    var pre = el("pre", "arguments");
    pre.tabIndex = 0;
    pre.setAttribute("aria-label", "arguments of " + approval.tool.name);
    pre.setAttribute("data-testid", "arguments");
    var masked = [];
    appendJson(pre, approval.arguments, "", "", masked);
    box.appendChild(pre);
    if (masked.length > 0) box.appendChild(el("p", "hint", "Hidden because the tool's contract marks them sensitive: " + masked.join(", ")));
    approval.warnings.forEach(function (w) { box.appendChild(el("p", "warning", "⚠ " + w)); });
    approval.reasons.forEach(function (r) { box.appendChild(el("p", "hint", r)); });
    return box;
  }

  function fact(list, label, content, field) {
    list.appendChild(el("dt", "", label));
    var dd = el("dd");
    dd.setAttribute("data-field", field);
    if (typeof content === "string") dd.textContent = content; else dd.appendChild(content);
    list.appendChild(dd);
    return dd;
  }

`;

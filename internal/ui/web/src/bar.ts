// The context bar: where the window goes, in contextctl's categories
// (system prompt, tool definitions, messages, reserved output, free;
// messages past the usable window eat into the reserve and turn red). Used
// space is drawn in strong colours, the reserve in a pale one and free space
// palest, so an empty session looks empty at a glance.
import { h, comma } from "./dom.js";
import { percentText, percentTitle, type Usage } from "./api.js";

export function bar(u: Usage, big = false): HTMLElement {
  const window = Math.max(u.window, 1);
  const usable = u.window - u.reserved;
  const used = u.system + u.tools + u.messages;
  const segs: [string, number][] = [
    ["system", u.system],
    ["tools", u.tools],
  ];
  if (used <= usable) {
    segs.push(["messages", u.messages], ["free", usable - used], ["reserved", u.reserved]);
  } else {
    const over = Math.min(used - usable, u.reserved);
    segs.push(["over", u.messages], ["reserved", u.reserved - over]);
  }
  const el = h("div", {
    class: big ? "bar big" : "bar",
    role: "img",
    title: percentTitle(u),
    "aria-label": `${u.percent.toFixed(1)} % of the usable window used: system ${comma(u.system)}, tools ${comma(u.tools)}, messages ${comma(u.messages)}, reserved ${comma(u.reserved)}, free ${comma(u.free)} tokens`,
    "data-percent": u.percent.toFixed(2),
  });
  for (const [name, n] of segs) {
    if (n <= 0) continue;
    // Widths through the CSSOM: the page's CSP allows no inline style attributes.
    const seg = h("span", { class: `seg-${name}`, title: `${name}: ${comma(n)} tokens` });
    seg.style.width = `${(100 * n) / window}%`;
    el.append(seg);
  }
  return el;
}

export function legend(u: Usage): HTMLElement {
  // Shares of the whole window are tooltips; the figure in the text is
  // the one "% used" (of the usable window), as everywhere else.
  const whole = (n: number) => `${((100 * n) / Math.max(u.window, 1)).toFixed(1)} % of the whole ${comma(u.window)}-token window`;
  const rows: [string, string, number][] = [
    ["system", "System prompt", u.system],
    ["tools", "Tool definitions", u.tools],
    ["messages", "Messages", u.messages],
    ["reserved", "Reserved output", u.reserved],
    ["free", "Free", u.free],
  ];
  const ul = h("ul", { class: "legend" });
  ul.append(h("li", { class: "used-total", title: percentTitle(u) }, h("strong", {}, `${percentText(u)} used`), ` (${comma(u.used)} of ${comma(u.window - u.reserved)} usable tokens)`));
  for (const [cls, name, n] of rows) {
    ul.append(h("li", { title: whole(n) }, h("i", { class: `seg-${cls}`, "aria-hidden": "true" }), `${name} ${comma(n)}`));
  }
  if (u.over > 0) ul.append(h("li", {}, h("i", { class: "seg-over", "aria-hidden": "true" }), `Over by ${comma(u.over)}: compact or hand off`));
  return ul;
}

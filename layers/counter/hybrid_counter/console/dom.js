// Elements built with the DOM API: text goes in as text, never as markup.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "className") element.className = value;
    else if (name in element && typeof value !== "string") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function table(headings, rows, attributes = {}) {
  return h(
    "table",
    attributes,
    h("thead", {}, h("tr", {}, headings.map((heading) => h("th", {}, heading)))),
    h("tbody", {}, rows),
  );
}

export function usageMeter(used, limit, id) {
  return h("meter", { id, min: "0", max: String(Math.max(limit, 1)), value: String(Math.min(used, Math.max(limit, 1))), low: String(0.8 * limit), high: String(0.999 * limit), optimum: "0" });
}

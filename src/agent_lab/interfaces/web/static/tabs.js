// The view tabs as a keyboard-usable tab list: the selected tab is the one in the Tab
// order; arrow keys, Home and End move between tabs and show their view.

const MOVES = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };

export function wireTabs(show) {
  const tabs = [...document.querySelectorAll(".tab")];
  for (const tab of tabs) {
    tab.addEventListener("click", () => show(tab.dataset.view));
    tab.addEventListener("keydown", (event) => {
      const at = tabs.indexOf(tab);
      let next = null;
      if (event.key in MOVES) next = tabs[(at + MOVES[event.key] + tabs.length) % tabs.length];
      else if (event.key === "Home") next = tabs[0];
      else if (event.key === "End") next = tabs[tabs.length - 1];
      if (!next) return;
      event.preventDefault();
      show(next.dataset.view);
      next.focus();
    });
  }
}

export function markTab(name) {
  for (const tab of document.querySelectorAll(".tab")) {
    const selected = tab.dataset.view === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
  }
}

"""Builds the docs and checks them in headless Chromium, the way a reader sees them.

    python docs/check_rendering.py                        # build, check, screenshots
    python docs/check_rendering.py --html docs/_build/html --screenshots /tmp/shots

Every page of the site (the guide, the API reference and the others) is opened as a file
at 1280 x 900 px, and the check fails (exit status 1) if

- a code block (`pre`) is wider than its box (scrollWidth > clientWidth) or its container,
  or a table is wider than the column: the reader would have to scroll sideways;
- code is rendered as italic prose: any `cite` (what single backticks give without a
  `default_role`), an `em` whose text looks like code (brackets, `=`, `.`, `_` ...), or a
  parameter or return type (Sphinx puts those in `em` too) that is not styled upright;
- TensorFlow's private module paths (`tensorflow.python.*`) show outside code blocks, or the
  API page has no link to tf.GradientTape on tensorflow.org.

A full-page screenshot of each page (and of the guide in dark mode) goes to --screenshots.
Needs Playwright for Python (`pip install playwright`) and a Chromium: /usr/bin/chromium
(Debian's `chromium` package) or --chromium PATH; Playwright's own browser download is not
used.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
WIDTH, HEIGHT = 1280, 900
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
NOT_PAGES = {"genindex.html", "search.html", "py-modindex.html"}

# Runs in the page: what a reader would see wrong, as plain data.
_INSPECT = r"""
() => {
  const article = document.querySelector("article") || document.body;
  const pres = [...article.querySelectorAll("pre")];
  const overflows = [];
  for (const pre of pres) {
    const box = pre.parentElement;
    const scrolls = pre.scrollWidth > pre.clientWidth;
    const sticksOut = pre.getBoundingClientRect().right > box.getBoundingClientRect().right + 1
      || pre.getBoundingClientRect().right > article.getBoundingClientRect().right + 1;
    if (scrolls || sticksOut) {
      const line = pre.innerText.split("\n").reduce((a, b) => (b.length > a.length ? b : a), "");
      overflows.push({scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth,
                      longest: line});
    }
  }
  // furo puts a table in a scrolling wrapper, a little wider than the column
  const wideTables = [...article.querySelectorAll("table")].filter((table) => {
    const box = table.parentElement.classList.contains("table-wrapper")
      ? table.parentElement : null;
    return box ? box.scrollWidth > box.clientWidth
      : table.getBoundingClientRect().right > article.getBoundingClientRect().right + 1;
  }).map((table) => ({width: Math.round(table.getBoundingClientRect().width),
                      first: table.innerText.replace(/\s+/g, " ").slice(0, 60)}));
  const looksLikeCode = /[()[\]{}=<>_.`]|->/;
  const isTypeOfField = (em) => {
    const dd = em.closest("dl.field-list > dd");
    if (!dd) return false;
    const dt = dd.previousElementSibling;
    if (dt && /type/i.test(dt.textContent)) return true;  // "Return type"
    const p = em.closest("p");
    if (!p) return false;
    // A parameter's type sits between its name and the " – " that starts its description.
    const walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (em.contains(node)) return true;
      if (node.textContent.includes("\u2013")) return false;
    }
    return false;
  };
  const italicCode = [];
  for (const el of article.querySelectorAll("cite, em")) {
    if (el.closest(".sig, pre, code")) continue;
    const italic = getComputedStyle(el).fontStyle === "italic";
    // types must look like code; any other em must not hold code
    const bad = el.tagName === "CITE"
      || (isTypeOfField(el) ? italic : looksLikeCode.test(el.textContent));
    if (bad) italicCode.push(el.textContent);
  }
  const privateNames = [];
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.textContent.includes("tensorflow.python.") && !node.parentElement.closest("pre")) {
      privateNames.push(node.textContent.trim());
    }
  }
  const tfLinks = [...article.querySelectorAll(
    'a[href^="https://www.tensorflow.org/api_docs/python/tf/"]')].map((a) => a.href);
  return {pres: pres.length, overflows, wideTables, italicCode, privateNames, tfLinks};
}
"""


def build(html: pathlib.Path) -> None:
    """sphinx-build -W, as tox runs it."""
    subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(HERE),
                    str(html)], check=True)


def pages(html: pathlib.Path) -> list:
    return sorted(p for p in html.glob("*.html") if p.name not in NOT_PAGES)


def problems(page: str, found: dict) -> list:
    """The failures on one page, as lines to print."""
    out = [f"{page}: code block overflows ({o['scrollWidth']} > {o['clientWidth']} px): "
           f"{o['longest']!r}" for o in found["overflows"]]
    out += [f"{page}: table wider than the column ({t['width']} px): {t['first']!r}"
            for t in found["wideTables"]]
    out += [f"{page}: code in italics: {text!r}" for text in found["italicCode"]]
    out += [f"{page}: private TensorFlow name: {text!r}" for text in found["privateNames"]]
    if page == "api.html" and not any(link.endswith("/tf/GradientTape")
                                      for link in found["tfLinks"]):
        out.append(f"{page}: no link to tf.GradientTape on tensorflow.org")
    return out


def check(html: pathlib.Path, shots: pathlib.Path | None, chromium: str) -> int:
    from playwright.sync_api import sync_playwright

    failures, total_pres, files = [], 0, pages(html)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        view = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        for file in files:
            view.goto(file.as_uri())
            view.wait_for_load_state("load")
            found = view.evaluate(_INSPECT)
            total_pres += found["pres"]
            failures += problems(file.name, found)
            print(f"{file.name}: {found['pres']} code blocks, {len(found['overflows'])} "
                  f"overflowing, {len(found['italicCode'])} code in italics, "
                  f"{len(found['tfLinks'])} links to tensorflow.org")
            if shots:
                view.screenshot(path=str(shots / file.with_suffix(".png").name), full_page=True)
        if shots:
            view.emulate_media(color_scheme="dark")
            view.goto((html / "guide.html").as_uri())
            view.screenshot(path=str(shots / "guide-dark.png"), full_page=False)
        browser.close()
    print(f"{len(files)} pages, {total_pres} code blocks, {len(failures)} problems"
          + (f"; screenshots in {shots}" if shots else ""))
    for line in failures:
        print("FAIL " + line)
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", type=pathlib.Path,
                        help="check this built site instead of building one")
    parser.add_argument("--screenshots", type=pathlib.Path, help="folder for the PNGs")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                        help="the Chromium executable (default: $CHROMIUM or /usr/bin/chromium)")
    args = parser.parse_args(argv)
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        html = args.html or pathlib.Path(folder) / "html"
        if not args.html:
            build(html)
        return check(html.resolve(), args.screenshots, args.chromium)


if __name__ == "__main__":
    sys.exit(main())

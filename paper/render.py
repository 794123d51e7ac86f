"""Write a table as Markdown and as LaTeX (longtable + booktabs).

Cells and captions are plain text with `code` spans; Markdown keeps them,
LaTeX gets them escaped, with the few Greek and math symbols of the tables
mapped to math mode (pdflatex has no Unicode fonts by default).
Formatting of numbers lives here too, so every table rounds the same way
and the output is byte-stable.
"""
import math
import os
import re

NOT_RUN = "not run"


def fmt(x, digits=4):
    """Fixed significant digits; None -> 'n/a'; inf/nan spelled out."""
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if x == int(x) and abs(x) < 1e15:
        return "%d" % x
    ax = abs(x)
    if 1e-3 <= ax < 1e6:
        s = "%.*f" % (max(digits - 1 - int(math.floor(math.log10(ax))), 0), x)
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    m, e = ("%.*e" % (digits - 1, x)).split("e")
    if "." in m:
        m = m.rstrip("0").rstrip(".")
    return m + "e" + e


def fixed(x, places):
    """Fixed decimal places (accuracies, differences)."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return fmt(x)
    s = "%.*f" % (places, x)
    if s.startswith("-") and float(s) == 0:
        s = s[1:]            # no '-0.00'
    return s


def signed(x, places):
    if x is None:
        return "n/a"
    s = fixed(x, places)
    return s if s.startswith("-") or float(s) == 0 else "+" + s


class Block:
    """One tabular: optional subtitle, header, alignments ('l'/'r'), rows."""

    def __init__(self, header, rows, align=None, subtitle=None):
        self.header = list(header)
        self.rows = [[c if isinstance(c, str) else fmt(c) for c in r]
                     for r in rows]
        # one spec per column: "l", "r" or a LaTeX p{width} column
        if align is None:
            align = ["l"] + ["r"] * (len(header) - 1)
        elif isinstance(align, str):
            align = list(align)
        assert len(align) == len(self.header), (header, align)
        self.align = align
        self.subtitle = subtitle


class Doc:
    """A numbered table (or a figure caption) with its data provenance."""

    def __init__(self, name, title, caption, commands, files, blocks,
                 notes=(), show_files=True, font="footnotesize"):
        self.name, self.title, self.caption = name, title, caption
        self.font = font    # LaTeX size: wide tables use scriptsize
        self.show_files = show_files
        self.commands = sorted(set(commands))
        self.files = sorted(set(files))
        self.blocks, self.notes = blocks, list(notes)

    def provenance(self):
        if self.commands:
            s = "Data: " + "; ".join("`%s`" % c for c in self.commands)
        else:
            s = "Data: no producer output found (not run)"
        if self.files and self.show_files:
            fl = ["`%s`" % f for f in self.files]
            if len(fl) > 6:      # long run lists: the first few and a count
                fl = fl[:4] + ["… and %d more" % (len(fl) - 4)]
            s += " (files: " + ", ".join(fl) + ")"
        return s + "."


# ---------------------------------------------------------------- Markdown

def _md_cell(s):
    return s.replace("|", "\\|")


def to_markdown(doc):
    out = ["## %s. %s" % (doc.name, doc.title), ""]
    out.append("%s %s" % (doc.caption, doc.provenance()))
    for b in doc.blocks:
        out.append("")
        if b.subtitle:
            out += ["**%s**" % b.subtitle, ""]
        out.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
        out.append("|" + "|".join("---:" if a == "r" else "---"
                                  for a in b.align) + "|")
        if not b.rows:
            out.append("| " + " | ".join([NOT_RUN] + [""] * (len(b.header) - 1))
                       + " |")
        for r in b.rows:
            out.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
    for n in doc.notes:
        out += ["", n]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------- LaTeX

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%",
                "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "|": r"\textbar{}", "<": r"\textless{}", ">": r"\textgreater{}"}
_TEX_SYMBOL = {"δ": r"$\delta$", "ξ": r"$\xi$", "ρ": r"$\rho$",
               "γ": r"$\gamma$", "τ": r"$\tau$", "φ": r"$\phi$",
               "Φ": r"$\Phi$", "α": r"$\alpha$", "σ": r"$\sigma$",
               "‖": r"$\|$", "∇": r"$\nabla$", "≤": r"$\le$", "≥": r"$\ge$",
               "≈": r"$\approx$", "×": r"$\times$", "−": "-", "–": "--",
               "²": r"$^2$", "∪": r"$\cup$", "∈": r"$\in$", "·": r"$\cdot$",
               "̂": "", "→": r"$\to$", "≠": r"$\ne$", "…": r"\dots{}",
               "√": r"$\surd$", "±": r"$\pm$", "∞": r"$\infty$",
               "μ": r"$\mu$", "ε": r"$\varepsilon$", "*": r"$^*$",
               "Δ": r"$\Delta$", "θ": r"$\theta$", "π": r"$\pi$",
               "Σ": r"$\Sigma$", "ω": r"$\omega$", "λ": r"$\lambda$",
               "κ": r"$\kappa$", "η": r"$\eta$", "β": r"$\beta$",
               "—": "---", "′": r"$'$", "∑": r"$\sum$", "⌊": r"$\lfloor$",
               "⌋": r"$\rfloor$", "⁻": r"$^-$", "¹": r"$^1$", "³": r"$^3$",
               "≥": r"$\ge$", "∉": r"$\notin$", "⊆": r"$\subseteq$",
               "ℓ": r"$\ell$", "°": r"$^\circ$", "é": r"\'e",
               "\u00a0": "~", "“": "``", "”": "''", "‘": "`", "’": "'"}
# a Greek letter with a word subscript (ξ_bi, ξ_t), or a lone Latin letter
# with a one-character one (x_t), is one math symbol
_GREEK_SUB = re.compile("([%s])_([A-Za-z0-9]+)" % "".join(
    ch for ch in _TEX_SYMBOL if "\\" in _TEX_SYMBOL[ch]
    and _TEX_SYMBOL[ch].startswith("$\\") and ch.isalpha())
    + "|(?<![A-Za-z0-9])([A-Za-z])_([A-Za-z0-9])(?![A-Za-z0-9])")


def _tex_plain(s):
    # split: text, Greek, its subscript, Latin, its subscript, text, ...
    parts = _GREEK_SUB.split(s)
    out = []
    for i in range(0, len(parts), 5):
        out.append(_tex_chars(parts[i]))
        if i + 4 < len(parts):
            if parts[i + 1]:
                sym, sub = _TEX_SYMBOL[parts[i + 1]][1:-1], parts[i + 2]
            else:
                sym, sub = parts[i + 3], parts[i + 4]
            sub = sub if len(sub) == 1 else r"\mathrm{%s}" % sub
            out.append("$%s_{%s}$" % (sym, sub))
    # adjacent math pieces: $a$$b$ -> $ab$ reads better and stays valid;
    # long specs like quadratic:P=4;d=50 may break after a comma or ';'
    return re.sub(r"([,;])(?=\S)", r"\1\\allowbreak{}",
                  "".join(out).replace("$$", ""))


def _tex_chars(s):
    out = []
    for i, ch in enumerate(s):
        if ch == "-" and s[i + 1:i + 2] == "-":
            out.append("-{}")    # T1 fonts join -- into an en dash
        elif ch in _TEX_SPECIAL:
            out.append(_TEX_SPECIAL[ch])
        elif ch in _TEX_SYMBOL:
            out.append(_TEX_SYMBOL[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append("?")      # no glyph: visible rather than a TeX error
    return "".join(out)


def _tex_code(s):
    esc = "".join(_TEX_SPECIAL.get(ch, ch) if ord(ch) < 128
                  else _tex_chars(ch) for ch in s)
    # a copied command must keep its "--": T1 fonts, the typewriter ones
    # too, join -- into an en dash and --- into an em dash
    esc = esc.replace("--", "-{}-").replace("--", "-{}-")
    # allow breaks after '/' and ',' in long paths and argument lists
    esc = esc.replace("/", "/\\allowbreak{}").replace(",", ",\\allowbreak{}")
    return r"\texttt{" + esc + "}"


def tex(s):
    """Plain text with `code` spans and **bold** to LaTeX."""
    parts = re.split(r"(`[^`]*`)", s)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) >= 2:
            out.append(_tex_code(p[1:-1]))
        else:
            bits = re.split(r"(\*\*[^*]+\*\*)", p)
            for b in bits:
                if b.startswith("**") and b.endswith("**") and len(b) > 4:
                    out.append(r"\textbf{" + _tex_plain(b[2:-2]) + "}")
                else:
                    out.append(_tex_plain(b))
    return "".join(out)


def to_latex(doc):
    label = "tab:" + doc.name
    out = ["% generated by paper/gen-paper; do not edit",
           r"\begingroup\%s\setlength{\tabcolsep}{%s}"
           % (doc.font, "3pt" if doc.font == "footnotesize" else "1.5pt")]
    first = True
    for b in doc.blocks or [Block(["(no data)"], [], "l")]:
        if not first:
            # every longtable steps the table counter, captioned or not:
            # a table of several blocks is still one table
            out.append(r"\addtocounter{table}{-1}")
        # wrapped columns ragged right: justified narrow cells gape
        out.append(r"\begin{longtable}{%s}" % "".join(
            r">{\raggedright\arraybackslash}" + a if a.startswith("p{")
            else a for a in b.align))
        head = " & ".join(tex(h) for h in b.header) + r" \\"
        sub = (r"\multicolumn{%d}{l}{\emph{%s}}\\"
               % (len(b.header), tex(b.subtitle)) if b.subtitle else None)
        # the caption and label in the first head only: \endhead repeats
        # on every page, and a label there is defined once per page
        if first:
            out.append(r"\caption{\textbf{%s. %s} %s %s}\label{%s}\\"
                       % (tex(doc.name), tex(doc.title), tex(doc.caption),
                          tex(doc.provenance()), label))
        out += ([sub] if sub else []) + [r"\toprule", head,
                                         r"\midrule\endfirsthead"]
        out.append(r"\multicolumn{%d}{l}{\emph{%s (continued)%s}}\\"
                   % (len(b.header), tex(doc.name),
                      ": " + tex(b.subtitle) if b.subtitle else ""))
        out += [r"\toprule", head, r"\midrule\endhead"]
        first = False
        rows = b.rows or [[NOT_RUN] + [""] * (len(b.header) - 1)]
        for r in rows:
            out.append(" & ".join(tex(c) for c in r) + r" \\")
        out.append(r"\bottomrule")
        out.append(r"\end{longtable}")
    for n in doc.notes:
        out.append(tex(n) + r"\par")
    out.append(r"\endgroup")
    return "\n".join(out) + "\n"


def write_doc(doc, outdir, stem):
    os.makedirs(outdir, exist_ok=True)
    for ext, text in (("md", to_markdown(doc)), ("tex", to_latex(doc))):
        with open(os.path.join(outdir, "%s.%s" % (stem, ext)), "w",
                  encoding="utf-8", newline="\n") as f:
            f.write(text)

#!/usr/bin/env python3
"""Checks that each HTML fragment of a file is well-formed, and that its tags match a source's.

    check_xml.py FILE [--separator SEP] [--compare SRC] [--strip OUT] [--show N]

FILE holds one fragment per line (or per SEP, with escapes such as '\\0' or '\\n\\n'), as
`nmt translate --format html` writes them. Each fragment is wrapped in a root element and parsed
with xml.etree.ElementTree after what HTML allows and XML does not is rewritten: void elements
(<br>, <img src=x>, ...) self-closed, tag names lower-cased, attribute values quoted, named
entities as numeric references, a '&' or '<' that starts no entity or tag escaped, script and
style content as CDATA, doctypes and <?xml?> declarations dropped. End tags that HTML makes
optional (<p>, <li> left open) still count as errors: nmt writes what it read.
--compare SRC: for line i, whether each tag name opens and closes as many times in FILE as in
line i of SRC (html.parser's reading; comments and script content do not count).
--strip OUT: writes each fragment's text, tags removed (a block tag or <br> as a space, script
and style dropped), entities decoded and whitespace runs as one space, for BLEU of the text.
Prints a summary (and the first N problems); exits 1 if a fragment does not parse or, with
--compare, its tags differ.
"""

import argparse
import codecs
import html
import html.entities
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta",
        "param", "source", "track", "wbr"}
BLOCK = {"address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "div",
         "dl", "dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
         "head", "header", "hr", "html", "li", "main", "nav", "ol", "option", "p", "pre",
         "section", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr", "ul"}
XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}

ATTRIBUTE = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'<>`]*))?""")
START_TAG = (r"""<([A-Za-z][^\s/<>]*)((?:\s+[^\s"'<>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'"""
             r"""|[^\s"'<>`]*))?)*)\s*(/?)>""")
END_TAG = r"</([A-Za-z][^\s/<>]*)\s*>"
# Markup, or a '<' that starts none ("a < b"); a '<' that starts a tag left unfinished matches
# nothing and stays, so that the parse fails there.
MARKUP = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<![^>]*>|(%s)|(%s)|<(?![A-Za-z/!?])"
                    % (END_TAG, START_TAG), re.S)
RAW_TEXT = re.compile(r"(<(script|style)\b[^>]*>)(.*?)(</\2\s*>)", re.S | re.I)
REFERENCE = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def fix_reference(match):
    """A named entity as a numeric reference; an unknown one as text, as HTML reads it."""
    ref = match.group(1)
    if ref.startswith("#") or ref in XML_ENTITIES:
        return match.group(0)
    code = html.entities.name2codepoint.get(ref)
    return "&#%d;" % code if code is not None else "&amp;" + ref + ";"


def fix_text(text):
    """Text with named entities as numeric references and a '&' that starts none escaped."""
    out, pos = [], 0
    for amp in re.finditer("&", text):
        if amp.start() < pos:
            continue
        out.append(text[pos:amp.start()])
        ref = REFERENCE.match(text, amp.start())
        out.append(fix_reference(ref) if ref else "&amp;")
        pos = ref.end() if ref else amp.end()
    out.append(text[pos:])
    return "".join(out)


def fix_start_tag(name, attributes, self_closing):
    """The start tag with its name lower-cased, its values quoted and a void element closed."""
    name = name.lower()
    out = []
    for attr in ATTRIBUTE.finditer(attributes):
        value = attr.group(2)
        if value is None:  # <input disabled>
            value = attr.group(1)
        elif value[:1] in ("'", '"'):
            value = value[1:-1]
        quote = "'" if '"' in value else '"'
        out.append(" %s=%s%s%s" % (attr.group(1), quote, fix_text(value).replace("<", "&lt;"),
                                   quote))
    close = "/" if self_closing or name in VOID else ""
    return "<%s%s%s>" % (name, "".join(out), close)


def fix_markup(m):
    token = m.group(0)
    if token == "<":
        return "&lt;"
    if m.group(1):  # an end tag; </br> is dropped, as the <br> closed itself
        name = m.group(2).lower()
        return "" if name in VOID else "</%s>" % name
    if m.group(3):
        return fix_start_tag(m.group(4), m.group(5), m.group(6))
    if token.startswith("<?"):
        return "" if token[2:5].lower() == "xml" else token
    if token.startswith("<!") and not token.startswith(("<!--", "<![CDATA[")):
        return ""  # a doctype
    return token


def raw_text_as_cdata(m):
    body = m.group(3)
    body = "<![CDATA[%s]]>" % body if "]]>" not in body else html.escape(body, quote=False)
    return m.group(1) + body + m.group(4)


def to_xml(fragment):
    """The fragment as XML, wrapped in a root element."""
    fragment = RAW_TEXT.sub(raw_text_as_cdata, fragment)
    out, pos = [], 0
    for m in MARKUP.finditer(fragment):
        out.append(fix_text(fragment[pos:m.start()]))
        out.append(fix_markup(m))
        pos = m.end()
    out.append(fix_text(fragment[pos:]))
    return "<root>" + "".join(out) + "</root>"


class TagCounter(HTMLParser):
    """Opening tags by name ("b"), self-closing ones included, and closing ones ("/b")."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.counts = Counter()

    def handle_starttag(self, tag, attrs):
        self.counts[tag] += 1

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] += 1

    def handle_endtag(self, tag):
        self.counts["/" + tag] += 1


class TextStripper(HTMLParser):
    """The text without tags: a block tag as a space, script and style dropped."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")
        self.handle_startendtag(tag, attrs)

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCK:
            self.parts.append(" ")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
        self.handle_startendtag(tag, [])

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)

    def text(self):
        return " ".join("".join(self.parts).split())


def run_parser(parser, fragment):
    parser.feed(fragment)
    parser.close()
    return parser


def read_fragments(path, separator):
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    if separator == "\n":
        text = text.replace("\r\n", "\n")
    fragments = text.split(separator)
    if fragments and fragments[-1] == "":
        fragments.pop()
    return fragments


def tag_difference(source, target):
    keys = sorted(set(source) | set(target))
    return ", ".join("%s: %d vs %d" % (k, source[k], target[k]) for k in keys
                     if source[k] != target[k])


def check_parse(fragments, show):
    bad = []
    for i, fragment in enumerate(fragments, 1):
        try:
            ET.fromstring(to_xml(fragment))
        except ET.ParseError as e:
            bad.append((i, e))
    n = len(fragments)
    print("parse: %d/%d fragments are well-formed XML (%.1f%%)"
          % (n - len(bad), n, 100.0 * (n - len(bad)) / max(n, 1)))
    for i, e in bad[:show]:
        print("  fragment %d: %s (of the rewritten fragment, after <root>)" % (i, e))
    return len(bad)


def check_tags(fragments, sources, show):
    if len(sources) != len(fragments):
        print("compare: %d source fragments but %d fragments; comparing the first %d"
              % (len(sources), len(fragments), min(len(sources), len(fragments))))
    differ = []
    for i, (source, target) in enumerate(zip(sources, fragments), 1):
        s = run_parser(TagCounter(), source).counts
        t = run_parser(TagCounter(), target).counts
        if s != t:
            differ.append((i, tag_difference(s, t)))
    n = min(len(sources), len(fragments))
    print("compare: %d/%d fragments have the tags of the source (%.1f%%)"
          % (n - len(differ), n, 100.0 * (n - len(differ)) / max(n, 1)))
    for i, what in differ[:show]:
        print("  fragment %d: source vs file: %s" % (i, what))
    return len(differ) + abs(len(sources) - len(fragments))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--separator", default="\\n",
                    help="between fragments, with backslash escapes (default: \\n)")
    ap.add_argument("--compare", metavar="SRC", help="source fragments to compare tags with")
    ap.add_argument("--strip", metavar="OUT", help="write the text of each fragment here")
    ap.add_argument("--show", type=int, default=10, metavar="N",
                    help="problems to print of each kind (default: 10)")
    args = ap.parse_args(argv)
    separator = codecs.decode(args.separator, "unicode_escape")
    if not separator:
        ap.error("--separator must not be empty")
    fragments = read_fragments(args.file, separator)
    problems = check_parse(fragments, args.show)
    if args.compare:
        problems += check_tags(fragments, read_fragments(args.compare, separator), args.show)
    if args.strip:
        with open(args.strip, "w", encoding="utf-8") as out:
            for fragment in fragments:
                out.write(run_parser(TextStripper(), fragment).text() + "\n")
        print("strip: wrote the text of %d fragments to %s" % (len(fragments), args.strip))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

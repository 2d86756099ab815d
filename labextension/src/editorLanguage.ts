/**
 * The editor language of a `%%agent` cell: its first line is the cell magic and its options,
 * the rest is the prompt, written as Markdown.
 *
 * Built as Markdown (@codemirror/lang-markdown) plus one block parser for the magic line, so the
 * body gets JupyterLab's own Markdown highlighting and the magic line its own nodes. The tags
 * come from @lezer/highlight, which JupyterLab shares as a singleton, so JupyterLab's theme
 * colours them (light and dark). `classHighlighter` adds stable `tok-*` classes as well: the
 * browser test reads them, and user CSS may too.
 */
import { markdown, markdownLanguage } from '@codemirror/lang-markdown';
import { LanguageSupport, syntaxHighlighting } from '@codemirror/language';
import { classHighlighter, tags } from '@lezer/highlight';
import type { BlockContext, Line, MarkdownConfig } from '@lezer/markdown';

/** The MIME type a `%%agent` cell's editor gets while its source starts with the magic. */
export const AGENT_MIME = 'text/x-mibyan-agent';

const MAGIC = /^(\s*)(%%agent)(?=\s|$)(.*)$/;

/** The first line as `AgentMagic` > `AgentMagicName` (`%%agent`) + `AgentMagicArgs`. */
const magicLine: MarkdownConfig = {
  defineNodes: [
    { name: 'AgentMagic', block: true, style: tags.meta },
    { name: 'AgentMagicName', style: tags.keyword },
    { name: 'AgentMagicArgs', style: tags.meta }
  ],
  parseBlock: [
    {
      name: 'AgentMagic',
      parse(cx: BlockContext, line: Line): boolean {
        const match = cx.lineStart === 0 ? MAGIC.exec(line.text) : null;
        if (!match) {
          return false;
        }
        const nameFrom = match[1].length;
        const nameTo = nameFrom + match[2].length;
        const end = line.text.length;
        const children = [cx.elt('AgentMagicName', nameFrom, nameTo)];
        if (match[3].trim()) {
          children.push(cx.elt('AgentMagicArgs', nameTo + 1, end));
        }
        cx.addElement(cx.elt('AgentMagic', 0, end, children));
        cx.nextLine();
        return true;
      }
    }
  ]
};

let support: LanguageSupport | null = null;

/** The language (made once: every `%%agent` editor shares it). */
export function agentLanguage(): LanguageSupport {
  if (support === null) {
    const md = markdown({ base: markdownLanguage, extensions: [magicLine] });
    support = new LanguageSupport(md.language, [md.support, syntaxHighlighting(classHighlighter)]);
  }
  return support;
}

/**
 * mibyan-jupyter notebook tools: what each request from the kernel does to the notebook model,
 * and the validation of every request first.
 *
 * The kernel's requests carry what the model asked for (mibyan_jupyter/jupyter/kernel_tools/
 * notebook.py), so they are untrusted: every field is type- and size-checked, a cell is found
 * only by an id that exists in THIS notebook, metadata is rebuilt from two known strings, and
 * outputs are rebuilt from the nbformat fields we know (never eval, never HTML built here; the
 * notebook's own renderers show the outputs as they show any kernel output).
 */
import { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookModel } from '@jupyterlab/notebook';

export type Json = Record<string, unknown>;
type Output = Parameters<ICodeCellModel['outputs']['add']>[0];

const MAX_SOURCE = 1_000_000;
const MAX_ID = 100;
const MAX_TEXT = 20_000;
const MAX_IMAGE = 1_500_000;
const MAX_OUTPUTS = 100;
const MAX_OUTPUT_BYTES = 10_000_000;
const HEAD = 200;
const OUTPUT_TYPES = new Set(['stream', 'display_data', 'execute_result', 'error']);

/** A refusal whose message goes back to the model. */
export class Refused extends Error {}

function text(args: Json, key: string, limit: number, optional = false): string | null {
  const value = args[key];
  if ((value === undefined || value === null) && optional) {
    return null;
  }
  if (typeof value !== 'string') {
    throw new Refused(`${key} must be a string`);
  }
  if (value.length > limit) {
    throw new Refused(`${key} is too long (${value.length} characters, at most ${limit})`);
  }
  return value;
}

/** The cell with this id, and its index; refused when this notebook has none. */
function find(model: INotebookModel, args: Json, key = 'cell_id'): [ICellModel, number] {
  const id = text(args, key, MAX_ID) as string;
  for (let index = 0; index < model.cells.length; index++) {
    const cell = model.cells.get(index);
    if (cell.id === id) {
      return [cell, index];
    }
  }
  throw new Refused(`this notebook has no cell with id ${JSON.stringify(id)} (call list_cells)`);
}

/** Whether the cell is executing now: the `%%agent` cell of the run itself, whose live view
 * an edit, a delete or new outputs would destroy (and queued cells waiting behind it). */
function running(cell: ICellModel): boolean {
  return cell.type === 'code' && (cell as ICodeCellModel).executionState === 'running';
}

/** The cell of `find`, refused while it runs. */
function idle(model: INotebookModel, args: Json): [ICellModel, number] {
  const [cell, index] = find(model, args);
  if (running(cell)) {
    throw new Refused(`cell ${cell.id} is running (the agent's own cell, or one queued behind it)`);
  }
  return [cell, index];
}

/** `{session, message}` rebuilt from the request (nothing else is copied). */
function marker(args: Json): { session: string | null; message: string | null } {
  const meta = typeof args.metadata === 'object' && args.metadata ? (args.metadata as Json) : {};
  const pick = (key: string): string | null =>
    typeof meta[key] === 'string' ? (meta[key] as string).slice(0, 200) : null;
  return { session: pick('session'), message: pick('message') };
}

function clipped(value: unknown, limit: number): unknown {
  if (typeof value === 'string') {
    return value.length > limit ? `${value.slice(0, limit)}\n… (${value.length - limit} more characters)` : value;
  }
  if (Array.isArray(value)) {
    return clipped(value.join(''), limit);
  }
  return value;
}

/** One output as the kernel may read it: text clipped, large images left out. */
function outputForReading(output: Json): Json {
  const copy: Json = { ...output };
  if ('text' in copy) {
    copy.text = clipped(copy.text, MAX_TEXT);
  }
  if (typeof copy.data === 'object' && copy.data) {
    const data: Json = {};
    for (const [mime, value] of Object.entries(copy.data as Json)) {
      const isImage = mime.startsWith('image/');
      const size = typeof value === 'string' ? value.length : JSON.stringify(value).length;
      if (isImage && size > MAX_IMAGE) {
        data['text/plain'] = `[${mime} image of ${size} bytes, too large to send]`;
      } else {
        data[mime] = isImage ? value : clipped(value, MAX_TEXT);
      }
    }
    copy.data = data;
  }
  return copy;
}

function outputsOf(cell: ICellModel): Json[] {
  if (cell.type !== 'code') {
    return [];
  }
  return (cell as ICodeCellModel).outputs.toJSON().map(o => o as unknown as Json);
}

function summary(output: Json): string {
  const kind = String(output.output_type);
  if (kind === 'stream') {
    return `stream ${String(output.name)}`;
  }
  if (kind === 'error') {
    return `error ${String(output.ename)}`;
  }
  const data = typeof output.data === 'object' && output.data ? Object.keys(output.data) : [];
  return `${kind} ${data.join(' ')}`.trim();
}

function describe(cell: ICellModel, index: number, full: boolean, outputs: boolean): Json {
  const source = cell.sharedModel.getSource();
  const code = cell.type === 'code' ? (cell as ICodeCellModel) : null;
  const described: Json = {
    id: cell.id,
    index,
    type: cell.type,
    source: full ? source : source.slice(0, HEAD),
    execution_count: code ? code.executionCount : null,
    running: running(cell)
  };
  const all = outputsOf(cell);
  described.outputs = full ? (outputs ? all.map(outputForReading) : []) : all.map(summary);
  return described;
}

/** Every cell's id and source, for the kernel's mirror (the approval card's diffs). */
export function snapshot(model: INotebookModel): Json[] {
  const cells: Json[] = [];
  for (let index = 0; index < model.cells.length; index++) {
    const cell = model.cells.get(index);
    cells.push({ id: cell.id, source: cell.sharedModel.getSource().slice(0, 200_000) });
  }
  return cells;
}

/** An output rebuilt from the fields nbformat defines; refused when malformed. */
function cleanOutput(raw: unknown): Output {
  if (typeof raw !== 'object' || raw === null) {
    throw new Refused('an output must be an object');
  }
  const o = raw as Json;
  const kind = String(o.output_type);
  if (!OUTPUT_TYPES.has(kind)) {
    throw new Refused(`unknown output type ${JSON.stringify(kind).slice(0, 40)}`);
  }
  if (kind === 'stream') {
    const name = o.name === 'stderr' ? 'stderr' : 'stdout';
    return { output_type: kind, name, text: String(o.text ?? '') } as Output;
  }
  if (kind === 'error') {
    const traceback = Array.isArray(o.traceback) ? o.traceback.map(String) : [];
    return { output_type: kind, ename: String(o.ename), evalue: String(o.evalue), traceback } as Output;
  }
  const data = typeof o.data === 'object' && o.data && !Array.isArray(o.data) ? (o.data as Json) : {};
  const metadata = typeof o.metadata === 'object' && o.metadata ? (o.metadata as Json) : {};
  const clean: Json = { output_type: kind, data: { ...data }, metadata: { ...metadata } };
  if (kind === 'execute_result') {
    clean.execution_count = null;
  }
  return clean as unknown as Output;
}

/** Carry out one request on `model`; its result goes back to the kernel. */
export function apply(model: INotebookModel, op: string, args: Json): Json {
  switch (op) {
    case 'list': {
      const cells: Json[] = [];
      for (let index = 0; index < model.cells.length; index++) {
        cells.push(describe(model.cells.get(index), index, false, false));
      }
      return { cells };
    }
    case 'read': {
      const [cell, index] = find(model, args);
      return describe(cell, index, true, args.outputs !== false);
    }
    case 'insert':
      return insert(model, args);
    case 'replace': {
      const [cell] = idle(model, args);
      const source = text(args, 'source', MAX_SOURCE) as string;
      const expected = text(args, 'expected', MAX_SOURCE, true);
      if (expected !== null && expected !== cell.sharedModel.getSource().slice(0, 200_000)) {
        throw new Refused('the cell changed after the approval card was shown: read it again');
      }
      cell.sharedModel.setSource(source);
      cell.setMetadata('mibyan', marker(args));
      return { cell_id: cell.id };
    }
    case 'delete': {
      const [, index] = idle(model, args);
      model.sharedModel.deleteCell(index);
      return {};
    }
    case 'outputs':
      return showOutputs(model, args);
    default:
      throw new Refused(`unknown request ${JSON.stringify(op).slice(0, 40)}`);
  }
}

function insert(model: INotebookModel, args: Json): Json {
  const source = text(args, 'source', MAX_SOURCE) as string;
  const cellType = args.cell_type === 'markdown' ? 'markdown' : 'code';
  let index = model.cells.length;
  if (typeof args.below === 'string' && args.below) {
    index = find(model, args, 'below')[1] + 1;
  } else if (typeof args.above === 'string' && args.above) {
    index = find(model, args, 'above')[1];
  }
  const metadata = { mibyan: marker(args) };
  const created =
    cellType === 'code'
      ? model.sharedModel.insertCell(index, {
          cell_type: 'code',
          source,
          metadata,
          outputs: [],
          execution_count: null
        })
      : model.sharedModel.insertCell(index, { cell_type: 'markdown', source, metadata });
  return { cell_id: created.id, index };
}

function showOutputs(model: INotebookModel, args: Json): Json {
  const [cell] = idle(model, args);
  if (cell.type !== 'code') {
    throw new Refused('only a code cell shows outputs');
  }
  const raw = Array.isArray(args.outputs) ? args.outputs : [];
  if (raw.length > MAX_OUTPUTS || JSON.stringify(raw).length > MAX_OUTPUT_BYTES) {
    throw new Refused('too many or too large outputs to show');
  }
  const outputs = raw.map(cleanOutput);
  const count = args.execution_count;
  const code = cell as ICodeCellModel;
  code.outputs.clear();
  outputs.forEach(output => code.outputs.add(output));
  code.executionCount = typeof count === 'number' && Number.isInteger(count) && count >= 0 ? count : null;
  code.setMetadata('mibyan', { ...marker(args), ran: true });
  return {};
}

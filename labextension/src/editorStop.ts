/**
 * "Agent: stop": `%agent stop` in the notebook's kernel, without a cell.
 *
 * The agent's own `%%agent` cell is still executing, so an execute request on the main shell
 * would wait behind it: the stop would arrive when there is nothing left to stop. JupyterLab
 * 4.6 and ipykernel >= 7 speak kernel subshells (JEP 91), each served on a thread of its own, so
 * the command creates a subshell, executes `%agent stop` there silently (no history, no
 * execution count), shows what it printed, and deletes the subshell. `Agent.abort` is
 * thread-safe (core/agent.py). Without subshells it falls back to the running view's own Stop
 * button, which reaches the kernel over the view's comm.
 */
import { Notification } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

export const STOP_CODE = '%agent stop';

/** Execute `code` silently on a new subshell; what it printed, or the error line. */
async function executeOnSubshell(kernel: Kernel.IKernelConnection, code: string): Promise<string> {
  const created = await kernel.requestCreateSubshell({}).done;
  const subshellId = created.content.subshell_id;
  try {
    const msg = KernelMessage.createMessage<KernelMessage.IExecuteRequestMsg>({
      msgType: 'execute_request',
      channel: 'shell',
      username: kernel.username,
      session: kernel.clientId,
      subshellId,
      content: { code, silent: true, store_history: false, allow_stdin: false, stop_on_error: false }
    });
    const future = kernel.sendShellMessage(msg, true, true);
    let printed = '';
    future.onIOPub = message => {
      if (KernelMessage.isStreamMsg(message)) {
        printed += message.content.text;
      } else if (KernelMessage.isErrorMsg(message)) {
        printed += `${message.content.ename}: ${message.content.evalue}`;
      }
    };
    await future.done;
    return printed.trim();
  } finally {
    kernel.requestDeleteSubshell({ subshell_id: subshellId }, true).done.catch(() => undefined);
  }
}

/** Click the Stop button of a running `%%agent` view in the notebook; false if none. */
function clickViewStop(panel: NotebookPanel): boolean {
  const button = panel.content.node.querySelector<HTMLButtonElement>(
    '.mibyan-view button.mibyan-stop:not(:disabled)'
  );
  button?.click();
  return button !== null;
}

/** Stop the agent running in the notebook's kernel; says what happened in a notification. */
export async function stopAgent(panel: NotebookPanel | null): Promise<string> {
  const kernel = panel?.sessionContext.session?.kernel;
  if (!panel || !kernel) {
    Notification.warning('No kernel: there is no agent to stop.');
    return 'no kernel';
  }
  let said: string;
  try {
    await kernel.info;
    if (kernel.supportsSubshells) {
      said = (await executeOnSubshell(kernel, STOP_CODE)) || 'Stop sent.';
    } else if (clickViewStop(panel)) {
      said = 'Stop sent through the running view.';
    } else {
      said = 'This kernel has no subshells and no running agent view to stop.';
    }
  } catch (error) {
    said = `Stopping failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  Notification.info(`Agent: ${said}`, { autoClose: 5000 });
  return said;
}

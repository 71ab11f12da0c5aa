// Requests to the server extension (python/kernel_watchdog/server_extension.py), made with the
// server's own authentication (ServerConnection adds its token or XSRF cookie).
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export const DEATH_EVENT =
  'https://events.jupyter.org/kernel_watchdog/kernel_death/v1';

export interface ICell {
  execution_count: number | null;
  code: string;
}

// `copy`: text onto the clipboard; `insert_cell`: text as the notebook's first code cell.
export interface IRemedyAction {
  kind: 'copy' | 'insert_cell';
  label: string;
  text: string;
}

// One report as the notification shows it (the server's `summary`).
export interface IReportSummary {
  id: string;
  at_ms: number | null;
  kernel_id: string | null;
  notebook: string | null;
  path: string | null;
  readable: boolean;
  headline: string | null;
  cause: string | null;
  cell: ICell | null;
  peak_rss_bytes: number | null;
  first_remedy: string | null;
  // The first remedy's one-click step (the report's remedies[0].action), where it has one.
  first_action: IRemedyAction | null;
  kind: string | null;
  ended: string | null;
}

export interface ILimit {
  name: string;
  bytes: number;
  used: number;
  series: string;
  slope: number | null;
  time_to_limit_s: number | null;
}

// A kernel's live memory as the program tells it (daemon status row or `run`'s status file).
export interface IKernelStatus {
  watched: boolean;
  watched_by?: string;
  how_to_watch?: string;
  state?: string;
  rss_bytes?: number;
  gpu_bytes?: number;
  rss_change_60s_bytes?: number;
  limits?: {
    tightest: { name: string; bytes: number } | null;
    all: ILimit[];
    time_to_limit_s: number | null;
  };
  notebook?: string | null;
  now_ms: number;
}

async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'kernel-watchdog', path);
  const response = await ServerConnection.makeRequest(url, init, settings);
  if (!response.ok) {
    // The server extension says why in {"message": ...}.
    let why = `${response.status} ${response.statusText}`;
    try {
      why = (await response.json()).message || why;
    } catch {
      // not JSON: the status says it
    }
    throw new Error(why);
  }
  return response;
}

export async function reportsSince(
  sinceMs: number
): Promise<{ now_ms: number; reports: IReportSummary[] }> {
  return (await request(`reports?since_ms=${Math.floor(sinceMs)}`)).json();
}

export async function report(id: string): Promise<IReportSummary> {
  const doc = await (await request(`reports/${encodeURIComponent(id)}`)).json();
  return doc.summary as IReportSummary;
}

export async function reportPage(id: string): Promise<string> {
  return (await request(`reports/${encodeURIComponent(id)}/html`)).text();
}

export async function kernelStatus(kernelId: string): Promise<IKernelStatus> {
  return (await request(`kernels/${encodeURIComponent(kernelId)}`)).json();
}

// Where the kernel is now: `kernel-watchdog stacks` of it, as text. A POST: it stops the
// kernel's threads for a moment.
export async function stacks(
  kernelId: string
): Promise<{ kernel_id: string; notebook: string | null; taken_ms: number; text: string }> {
  return (
    await request(`kernels/${encodeURIComponent(kernelId)}/stacks`, { method: 'POST', body: '{}' })
  ).json();
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

// A limit's name as people say it (the program's timeline::limit_in_words).
export function limitInWords(name: string): string {
  switch (name) {
    case 'cgroup':
      return 'memory limit';
    case 'mem_total':
      return "machine's memory";
    case 'gpu_total':
      return 'GPU memory';
    default:
      return name;
  }
}

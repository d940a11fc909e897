// The Responses API shapes the translator reads and writes (only the fields it uses).
export interface ContentPart {
  type: string;
  text?: string;
  image_url?: string;
  detail?: string;
  refusal?: string;
}

export interface MessageItem {
  type?: 'message';
  role: 'user' | 'assistant' | 'system' | 'developer';
  content: string | ContentPart[];
  id?: string;
  status?: string;
}
export interface FunctionCallItem {
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  id?: string;
  status?: string;
}
export interface FunctionCallOutputItem {
  type: 'function_call_output';
  call_id: string;
  output: string | ContentPart[];
}
export interface ReasoningItem {
  type: 'reasoning';
  id?: string;
  summary?: Array<{ type: string; text: string }>;
  content?: Array<{ type: string; text: string }>;
  encrypted_content?: string | null;
}
export type InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem | { type: string; [k: string]: unknown };

export interface FunctionTool {
  type: 'function';
  name: string;
  description?: string;
  parameters?: unknown;
  strict?: boolean;
}

export interface ResponsesRequest {
  model: string;
  input?: string | InputItem[];
  instructions?: string;
  previous_response_id?: string;
  tools?: Array<FunctionTool | { type: string; [k: string]: unknown }>;
  tool_choice?: 'auto' | 'none' | 'required' | { type: string; name?: string };
  parallel_tool_calls?: boolean;
  max_output_tokens?: number;
  temperature?: number;
  top_p?: number;
  stream?: boolean;
  store?: boolean;
  text?: { format?: { type: string; name?: string; schema?: unknown; strict?: boolean; description?: string } };
  reasoning?: { effort?: string; summary?: string };
  metadata?: Record<string, string>;
  user?: string;
  include?: string[];
}

/** An item of a reply's `output`. */
export type OutputItem =
  | {
      type: 'message';
      id: string;
      status: 'completed' | 'incomplete';
      role: 'assistant';
      content: Array<{ type: 'output_text'; text: string; annotations: unknown[]; logprobs: unknown[] }>;
    }
  | {
      type: 'reasoning';
      id: string;
      summary: Array<{ type: 'summary_text'; text: string }>;
      content?: Array<{ type: 'reasoning_text'; text: string }>;
      encrypted_content?: string;
    }
  | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string; status: 'completed' | 'incomplete' };

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

// The messages-API shapes the translator reads and writes (only the fields it uses).
export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | Array<TextBlock | ImageBlock>;
  is_error?: boolean;
}
export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature?: string;
}
export type Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | { type: string; [k: string]: unknown };

export interface MessagesRequest {
  model: string;
  /** A `system` role mid-conversation is a beta the translator carries as a reminder (request.ts). */
  messages: Array<{ role: 'user' | 'assistant' | 'system'; content: string | Block[] }>;
  max_tokens?: number;
  system?: string | TextBlock[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  stream?: boolean;
  tools?: Array<{ name: string; description?: string; input_schema?: unknown }>;
  tool_choice?: { type: 'auto' | 'any' | 'none' } | { type: 'tool'; name: string } | 'auto' | 'any' | 'none';
  metadata?: { user_id?: string };
  thinking?: { type: 'enabled'; budget_tokens?: number } | { type: 'disabled' } | { type: string; budget_tokens?: number };
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

export interface Message {
  id: string;
  type: 'message';
  role: 'assistant';
  content: Block[];
  model: string;
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  usage: { input_tokens: number; output_tokens: number };
}

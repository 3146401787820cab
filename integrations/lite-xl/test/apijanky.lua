-- mod-version:3
-- The check's API-janky plugin: a completer that slows typing down through
-- Lite XL's core API, not through lines of its own.  On every STRIDE-th
-- keystroke in a document, BURSTS times, it spends PERFMON_CHECK_API_MS of
-- CPU in calls into the core: the text before the caret (Doc:get_text),
-- the document's lines tokenized (tokenizer.tokenize) and
-- common.fuzzy_match of the word being typed over a project's worth of
-- symbols.  It counts the time of those calls with os.clock: the ground
-- truth perfmon's self time for it is checked against.
local common = require "core.common"
local Doc = require "core.doc"
local tokenizer = require "core.tokenizer"

local BURSTS, STRIDE = 6, 20
local burst_s = tonumber(os.getenv("PERFMON_CHECK_API_MS") or "70") / 1000
local M = { bursts = 0, burned_s = 0, calls = 0, done = false }

local SYMBOLS = {}
local PARTS = { "get", "set", "draw", "line", "text", "doc", "view", "token", "syntax", "caret", "scroll" }
for i = 1, 3000 do
  SYMBOLS[i] = ("%s_%s_%d"):format(PARTS[i % #PARTS + 1], PARTS[i // #PARTS % #PARTS + 1], i)
end

local function complete(doc)
  local t0 = os.clock()
  local t
  repeat
    local line, col = doc:get_selection()
    local word = doc:get_text(line, 1, line, col):match("[%w_]*$")
    local state
    for i = 1, #doc.lines do
      local _
      _, state = tokenizer.tokenize(doc.syntax, doc.lines[i], state)
    end
    common.fuzzy_match(SYMBOLS, word ~= "" and word or "t")
    M.calls = M.calls + 1
    t = os.clock()
  until t - t0 >= burst_s
  M.burned_s = M.burned_s + (t - t0)
  M.bursts = M.bursts + 1
  M.done = M.bursts >= BURSTS
end

local keystrokes = 0
local text_input = Doc.text_input
function Doc:text_input(...)
  text_input(self, ...)
  keystrokes = keystrokes + 1
  if not M.done and keystrokes % STRIDE == 0 then complete(self) end
end

return M

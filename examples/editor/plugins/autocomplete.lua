-- autocomplete: suggests a completion for the word before the cursor.
--
-- The janky plugin of the demo.  On every keystroke it ranks its whole
-- vocabulary against the word typed so far with a fuzzy matcher, again and
-- again until its "quality budget" of 80 ms of CPU is spent.  Its author
-- thought 80 ms was fast; a keystroke that takes longer than 64 ms to
-- handle is jank the user sees, and the plugin watcher says so.

local BUDGET_S = 0.080 -- CPU seconds per keystroke (os.clock)

local vocabulary = {}
for _, stem in ipairs { "local", "function", "return", "table", "string",
  "insert", "concat", "format", "require", "editor", "buffer", "cursor",
  "line", "count", "print", "pairs", "ipairs", "select" } do
  for k = 1, 40 do vocabulary[#vocabulary + 1] = stem .. k end
end

-- How well word matches prefix: its letters in order, closer is better.
local function fuzzy(word, prefix)
  local score, from = 0, 1
  for i = 1, #prefix do
    local at = word:find(prefix:sub(i, i), from, true)
    if not at then return 0 end
    score = score + 1 / (at - from + 1)
    from = at + 1
  end
  return score
end

local function word_before_cursor()
  local line, col = editor.cursor()
  return (editor.line(line) or ""):sub(1, col - 1):match("[%w_]*$")
end

editor.on_key(function()
  local prefix = word_before_cursor()
  local start, best = os.clock(), nil
  repeat
    local best_score = 0
    for _, word in ipairs(vocabulary) do
      local s = fuzzy(word, prefix)
      if s > best_score then best, best_score = word, s end
    end
  until os.clock() - start >= BUDGET_S
  editor.status(best and prefix ~= "" and "complete: " .. best or "no completion")
end)

-- word-count: keeps the status bar's word and line counts up to date.
-- Well behaved: it counts the whole buffer, which is small, on each change.

local function count()
  local text = editor.text()
  local words = 0
  for _ in text:gmatch("[%w_]+") do words = words + 1 end
  local _, newlines = text:gsub("\n", "")
  editor.status(("%d words, %d lines"):format(words, newlines + 1))
end

editor.on_key(count)
editor.on_save(count)

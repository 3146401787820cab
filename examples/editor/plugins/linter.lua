-- linter: checks the buffer in the background, a little at each event.
--
-- Well behaved: the check runs in a coroutine that looks at two lines, then
-- yields until the next event (keystroke, cursor move or save), so no event
-- pays for the whole buffer.  A pass over the last line publishes its
-- warnings and starts again from the top.

local LINES_PER_STEP = 2
local MAX_WIDTH = 40

local function check(text, warnings, n)
  if text:find("%s$") then
    warnings[#warnings + 1] = n .. ": trailing space"
  end
  if #text > MAX_WIDTH then
    warnings[#warnings + 1] = n .. ": longer than " .. MAX_WIDTH
  end
  local _, opened = text:gsub("[%(%[{]", "")
  local _, closed = text:gsub("[%)%]}]", "")
  if opened ~= closed then
    warnings[#warnings + 1] = n .. ": unbalanced brackets"
  end
end

local step = coroutine.wrap(function()
  while true do
    local warnings, n = {}, 1
    while editor.line(n) do
      check(editor.line(n), warnings, n)
      if n % LINES_PER_STEP == 0 then coroutine.yield() end
      n = n + 1
    end
    editor.status(("lint: %d warning%s"):format(#warnings,
      #warnings == 1 and "" or "s"))
    coroutine.yield()
  end
end)

editor.on_key(step)
editor.on_cursor(step)
editor.on_save(step)

-- bracket-match: finds the bracket matching the one next to the cursor.
-- Well behaved: it scans one line, on cursor moves and keystrokes.

local OPEN = { ["("] = ")", ["["] = "]", ["{"] = "}" }
local CLOSE = { [")"] = "(", ["]"] = "[", ["}"] = "{" }

-- The column of the bracket matching the one at col of text, or nil.
local function match(text, col)
  local c = text:sub(col, col)
  local step, other = 1, OPEN[c]
  if not other then step, other = -1, CLOSE[c] end
  local depth, k = 0, col
  while k >= 1 and k <= #text do
    local d = text:sub(k, k)
    if d == c then
      depth = depth + 1
    elseif d == other then
      depth = depth - 1
      if depth == 0 then return k end
    end
    k = k + step
  end
  return nil
end

local function update()
  local line, col = editor.cursor()
  local text = editor.line(line) or ""
  for _, at in ipairs { col, col - 1 } do -- under the cursor, then before it
    local c = text:sub(at, at)
    if at >= 1 and (OPEN[c] or CLOSE[c]) then
      local m = match(text, at)
      editor.status(m and ("%s at %d:%d matches %d:%d"):format(c, line, at, line, m)
        or ("%s at %d:%d unmatched"):format(c, line, at))
      return
    end
  end
  editor.status("")
end

editor.on_cursor(update)
editor.on_key(update)

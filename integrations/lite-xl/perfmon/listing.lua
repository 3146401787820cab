-- The performance view's lines and its selection: the busy plugins' rows
-- in model.rows' order (by self time), the idle ones folded into one line
-- that expands, then the whole editor's row; which line is selected, kept
-- on the same plugin as the figures change, and the keyboard's moves.
-- Needs no editor (busted tests it); view.lua draws it.

local Listing = {}
Listing.__index = Listing

local listing = {}

--- A plugin is idle when its self time shows as 0.0 ms: under 50 µs.
listing.IDLE_US = 50

--- A new listing, empty, its idle plugins folded.
function listing.new()
  return setmetatable({ lines = {}, selected = 1, expanded = false, rows = {} }, Listing)
end

-- The selection stays on its key; on the fold when its plugin is idle and
-- folded; where it was (within the lines) when its line is gone.
local function select_key(self, key, idle)
  for i, line in ipairs(self.lines) do
    if line.key == key then
      self.selected = i
      return
    end
  end
  for _, line in ipairs(idle or {}) do
    if line.key == key then return select_key(self, "(idle)") end
  end
  self.selected = math.max(1, math.min(self.selected, #self.lines))
end

--- Lays out the lines of rows (model.rows', by self time) and total
-- (model.total's; optional), the selection kept on its line.  Each line:
-- { kind = "plugin", row, key = its name, idle = true for an idle one },
-- { kind = "fold", count = how many idle, expanded, key = "(idle)" } or
-- { kind = "total", row = the whole editor's, key }.
function Listing:set(rows, total)
  if type(rows) ~= "table" then
    error("bad argument #1 to 'set' (model.rows' rows expected, got " .. type(rows) .. ")", 2)
  end
  if total ~= nil and type(total) ~= "table" then
    error("bad argument #2 to 'set' (model.total's row expected, got " .. type(total) .. ")", 2)
  end
  self.rows, self.total = rows, total
  local key = self.lines[self.selected] and self.lines[self.selected].key
  local lines, idle = {}, {}
  for _, r in ipairs(rows) do
    if r.self_us < listing.IDLE_US then
      idle[#idle + 1] = { kind = "plugin", row = r, key = r.name, idle = true }
    else
      lines[#lines + 1] = { kind = "plugin", row = r, key = r.name }
    end
  end
  if #idle > 0 then
    lines[#lines + 1] = { kind = "fold", count = #idle, expanded = self.expanded, key = "(idle)" }
    if self.expanded then table.move(idle, 1, #idle, #lines + 1, lines) end
  end
  if total then lines[#lines + 1] = { kind = "total", row = total, key = total.name } end
  self.lines = lines
  select_key(self, key, idle)
end

--- The selected line (nil when there is none).
function Listing:current()
  return self.lines[self.selected]
end

--- Selects line i, within the lines.
function Listing:select(i)
  if math.type(i) ~= "integer" then
    error("bad argument #1 to 'select' (line number expected, got " .. (math.type(i) or type(i)) .. ")", 2)
  end
  self.selected = math.max(1, math.min(i, #self.lines))
end

--- Moves the selection by n lines (up when negative), stopping at the
-- first and the last.
function Listing:move(n)
  self:select(self.selected + n)
end

--- A page down (n = 1) or up (n = -1) of page lines (the lines the view
-- shows): the line that was last on the page is first on the next.
function Listing:page(n, page)
  self:move(n * math.max(1, page - 1))
end

function Listing:first() self:select(1) end
function Listing:last() self:select(#self.lines) end

--- Enter: unfolds the idle plugins or folds them again, on the fold's
-- line; true when it did.
function Listing:toggle()
  local line = self:current()
  if not line or line.kind ~= "fold" then return false end
  self:set_expanded(not self.expanded)
  return true
end

--- Unfolds (true) or folds (false) the idle plugins; folding selects the
-- fold's line when an idle plugin was selected.
function Listing:set_expanded(expanded)
  if expanded == self.expanded then return end
  self.expanded = expanded
  self:set(self.rows, self.total)
end

return listing

-- The performance view's columns: how each figure reads (rounded), which
-- columns fit a width and how wide each one is, and each cell's text cut to
-- its column, so that view.lua only draws.  Widths are in the units of
-- measure(text), the font's width of a text: pixels in the editor,
-- characters in the specs.  Needs no editor (busted tests it).

local columns = {}

local ELLIPSIS = "…"

---------------------------------------------------------------------------
-- Figures
---------------------------------------------------------------------------

--- A CPU time of us µs to three significant figures at most, in ms below
-- a second and in s above: "0.0 ms", "44.2 ms", "481 ms", "1.90 s",
-- "25.3 s", "312 s".
function columns.time(us)
  if type(us) ~= "number" then
    error("bad argument #1 to 'time' (number of µs expected, got " .. type(us) .. ")", 2)
  end
  local ms = us / 1000
  if ("%.1f"):format(ms) + 0 < 100 then return ("%.1f ms"):format(ms) end
  if ("%.0f"):format(ms) + 0 < 1000 then return ("%.0f ms"):format(ms) end
  local s = ms / 1000
  if ("%.2f"):format(s) + 0 < 10 then return ("%.2f s"):format(s) end
  if ("%.1f"):format(s) + 0 < 100 then return ("%.1f s"):format(s) end
  return ("%.0f s"):format(s)
end

--- A count: whole up to 99999, then in thousands ("123k") and millions
-- ("4.6M"); "-" for none (a monitor that does not count it).
function columns.count(n)
  if n == nil then return "-" end
  if type(n) ~= "number" then
    error("bad argument #1 to 'count' (number expected, got " .. type(n) .. ")", 2)
  end
  if n < 99999.5 then return ("%.0f"):format(n) end
  if n < 999499.5 then return ("%.0fk"):format(n / 1e3) end
  return ("%.1fM"):format(n / 1e6)
end

--- A share in % to one decimal: "17.5%".
function columns.percent(p)
  return ("%.1f%%"):format(p)
end

--- where.brief's words with each path cut to its file name: the column
-- has no room for directories (the view's detail shows the whole text).
function columns.short_where(text)
  return (text:gsub("[^%s,()]*[/\\]", ""))
end

---------------------------------------------------------------------------
-- Truncation
---------------------------------------------------------------------------

-- The first n characters of text: UTF-8 ones when text is valid UTF-8,
-- bytes otherwise.
local function prefix(text, n, utf)
  if not utf then return text:sub(1, n) end
  local stop = utf8.offset(text, n + 1)
  return text:sub(1, (stop or #text + 1) - 1)
end

--- text cut to width with an ellipsis at its end: the longest prefix (of
-- whole characters) that fits with "…", "" when not even "…" fits, text
-- itself when it fits.
function columns.truncate(text, width, measure)
  if measure(text) <= width then return text end
  if measure(ELLIPSIS) > width then return "" end
  local len = utf8.len(text)
  local utf = len ~= nil
  len = len or #text
  local lo, hi = 0, len - 1 -- the prefix of lo characters fits; hi + 1 does not
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if measure(prefix(text, mid, utf) .. ELLIPSIS) <= width then lo = mid else hi = mid - 1 end
  end
  return prefix(text, lo, utf) .. ELLIPSIS
end

---------------------------------------------------------------------------
-- The columns and their widths
---------------------------------------------------------------------------

-- On the screen in this order.  keep: the lower, the longer a column stays
-- as the width shrinks (plugin and self stay always); samples: the widest
-- texts of a fixed column, so that its width does not change as its
-- figures do; flex: a column as wide as its texts, when there is room,
-- and cut to what there is (not below min's width, or it goes).
local SPECS = {
  { key = "name", title = "plugin", align = "left", flex = true, min = "plugin…", keep = 0,
    cell = function(r) return r.name end },
  { key = "self", title = "self", align = "right", keep = 0, samples = { "88.8 ms", "888 ms", "8.88 s" },
    cell = function(r) return columns.time(r.self_us) end },
  { key = "share", title = "share", align = "right", keep = 1, samples = { "100.0%" }, bar = true,
    cell = function(r) return columns.percent(r.share) end },
  { key = "cpu", title = "cpu", align = "right", keep = 2, samples = { "88.8 ms", "888 ms", "8.88 s" },
    cell = function(r) return columns.time(r.cpu_us) end },
  { key = "longest", title = "longest", align = "right", keep = 3, samples = { "512-1024 ms" },
    cell = function(r) return r.longest end },
  { key = "count", align = "right", keep = 4, samples = { "88888", "888k" },
    cell = function(r, count) return columns.count(r[count]) end },
  { key = "hottest", title = "hottest", align = "left", flex = true, min = "hottest place", keep = 5,
    cell = function(r) return r.hottest and columns.short_where(r.hottest) or "" end },
}

--- Each cell's text of row r (a row of model.rows or model.total) for the
-- column of key, in full; count: "ticks" or "samples".
function columns.cell(key, r, count)
  for _, spec in ipairs(SPECS) do
    if spec.key == key then return spec.cell(r, count or "ticks") end
  end
  error(("bad argument #1 to 'cell' (a column's key expected, got %s)"):format(tostring(key)), 2)
end

local function check_fit(width, measure, opts)
  if type(width) ~= "number" or width ~= width then
    error("bad argument #1 to 'fit' (width expected, got " .. type(width) .. ")", 3)
  end
  if type(measure) ~= "function" then
    error("bad argument #2 to 'fit' (measure function expected, got " .. type(measure) .. ")", 3)
  end
  if type(opts) ~= "table" or type(opts.rows) ~= "table" then
    error("bad argument #3 to 'fit' (options with rows expected, got " .. type(opts) .. ")", 3)
  end
  local count = opts.count or "ticks"
  if count ~= "ticks" and count ~= "samples" then
    error(("bad argument #3 to 'fit' (count: \"ticks\" or \"samples\" expected, got %s)")
      :format(tostring(count)), 3)
  end
end

--- The columns that fit width, for opts.rows (the rows the view shows,
-- the whole editor's included).  opts: rows; count ("ticks", the default,
-- or "samples": the title and figure of the count column); gap (space
-- between two columns, 0 by default); bar (the width of share's bar, 0 by
-- default: none).  Returns a list of columns, left to right, each { key,
-- title, align, x, w, text_w, bar } (x from 0; text_w: the width for its
-- text, at its right for share, whose bar of width bar starts the column).
-- The rows' cells: columns.cells.
function columns.fit(width, measure, opts)
  check_fit(width, measure, opts)
  local count = opts.count or "ticks"
  local gap, bar = opts.gap or 0, opts.bar or 0
  local hottest = opts.rows[1] ~= nil and opts.rows[1].hottest ~= nil

  local cols = {}
  for _, spec in ipairs(SPECS) do
    if spec.key ~= "hottest" or hottest then
      local title = spec.title or count
      local natural = measure(title)
      if spec.flex then
        for _, r in ipairs(opts.rows) do natural = math.max(natural, measure(spec.cell(r, count))) end
      else
        for _, s in ipairs(spec.samples) do natural = math.max(natural, measure(s)) end
      end
      local col = { key = spec.key, title = title, align = spec.align, keep = spec.keep, flex = spec.flex,
        natural = natural, bar = spec.bar and bar or nil }
      if col.bar then col.natural = col.natural + bar + gap end
      col.least = spec.flex and math.min(natural, measure(spec.min)) or col.natural
      cols[#cols + 1] = col
    end
  end

  -- drop the columns that go first until the least widths fit
  local function least_total()
    local total = gap * (#cols - 1)
    for _, c in ipairs(cols) do total = total + c.least end
    return total
  end
  while least_total() > width do
    local drop
    for i, c in ipairs(cols) do
      if c.keep > 0 and (not drop or c.keep > cols[drop].keep) then drop = i end
    end
    if not drop then break end
    table.remove(cols, drop)
  end

  -- room over the least widths: to the flexible columns, left first
  local room = width - least_total()
  for _, c in ipairs(cols) do
    c.w = c.least
    if c.flex and room > 0 then
      local more = math.min(room, c.natural - c.least)
      c.w, room = c.w + more, room - more
    end
  end
  -- too narrow even for plugin and self: plugin gets what self leaves
  if room < 0 then cols[1].w = math.max(0, cols[1].w + room) end

  local x = 0
  for _, c in ipairs(cols) do
    c.x = x
    c.text_w = c.bar and math.max(0, c.w - c.bar - gap) or c.w
    x = x + c.w + gap
    c.keep, c.flex, c.natural, c.least = nil, nil, nil, nil
  end
  return cols
end

--- Row r's cells in cols (columns.fit's), each cut to its column's width
-- (its text_w): a list of texts, one per column.
function columns.cells(cols, r, measure, count)
  local cells = {}
  for i, c in ipairs(cols) do
    cells[i] = columns.truncate(columns.cell(c.key, r, count), c.text_w, measure)
  end
  return cells
end

return columns

--- perfmon.table: the text tables of the about:performance views (Prosody's
-- `perfmon:show()`, Lite XL's text export), written once: named columns,
-- figures right-aligned and rounded, long text cut to its column's width,
-- and child rows (a module's per-host instances) folded under their
-- parent unless asked for; and the performance table's columns, which
-- both show.
--
--   local text_table = require("perfmon.table")
--   local lines = text_table.render({
--     { key = "name", title = "module" },
--     { key = "self_ms", title = "self ms", figure = true },
--     { key = "where", title = "hottest", max = 40 },
--   }, rows, { unfold = false })
--
-- rows: { { name = ..., self_ms = ..., children = { rows } }, ... }.

local module = require("perfmon.module")
local arg_error = require("perfmon.args").error

local text_table = {}

--- A figure rounded for reading: three significant digits or so, never a
-- run of decimals ("62.8", "2658", "0.42"); integers as they are.
function text_table.figure(v)
  if type(v) ~= "number" or v ~= v then
    arg_error(1, "perfmon.table.figure", "number expected, got "
      .. (type(v) == "number" and "nan" or type(v)))
  end
  if math.type(v) == "integer" then return tostring(v) end
  local a = math.abs(v)
  if a >= 100 or a == 0 then return ("%.0f"):format(v) end
  if a >= 10 then return ("%.1f"):format(v) end
  return ("%.2f"):format(v)
end

-- The text of a cell: a column's format, a rounded figure, or the value.
local function cell(col, v)
  if v == nil then return "" end
  if col.format then return col.format(v) end
  if col.figure and type(v) == "number" then return text_table.figure(v) end
  return tostring(v)
end

-- Cut to the column's max width (in bytes: the tables' labels are ASCII,
-- paths and names may not be; utf8-safe cut where they are not).
local function cut(s, max)
  if not max or #s <= max then return s end
  local n = max - 3
  while n > 0 and (s:byte(n + 1) or 0) >= 0x80 and (s:byte(n + 1) or 0) < 0xC0 do n = n - 1 end
  return s:sub(1, n) .. "..."
end

-- A column's fields; one misspelt is an error, never ignored.
local COLUMN_FIELDS = { "key", "title", "figure", "format", "align", "max" }
local IS_COLUMN_FIELD = {}
for _, f in ipairs(COLUMN_FIELDS) do IS_COLUMN_FIELD[f] = true end

local function check_columns(columns)
  if type(columns) ~= "table" or #columns == 0 then
    arg_error(1, "perfmon.table.render", "list of columns expected, got "
      .. (type(columns) == "table" and "an empty table" or type(columns)), 2)
  end
  for i, col in ipairs(columns) do
    if type(col) ~= "table" or type(col.key) ~= "string" then
      arg_error(1, "perfmon.table.render", ("column %d: a table with a string key expected"):format(i), 2)
    end
    for k in pairs(col) do
      if not IS_COLUMN_FIELD[k] then
        arg_error(1, "perfmon.table.render", ("column %d: unknown field %s (fields: %s)"):format(
          i, type(k) == "string" and ("%q"):format(k) or ("[" .. tostring(k) .. "]"),
          table.concat(COLUMN_FIELDS, ", ")), 2)
      end
    end
    if col.title ~= nil and type(col.title) ~= "string" then
      arg_error(1, "perfmon.table.render", ("column %d: title must be a string, got %s"):format(
        i, type(col.title)), 2)
    end
    if col.align ~= nil and col.align ~= "left" and col.align ~= "right" then
      arg_error(1, "perfmon.table.render", ('column %d: align must be "left" or "right", got %s'):format(
        i, type(col.align) == "string" and ("%q"):format(col.align) or type(col.align)), 2)
    end
    if col.format ~= nil and type(col.format) ~= "function" then
      arg_error(1, "perfmon.table.render", ("column %d: format must be a function"):format(i), 2)
    end
    if col.max ~= nil and (math.type(col.max) ~= "integer" or col.max < 4) then
      arg_error(1, "perfmon.table.render", ("column %d: max must be an integer >= 4"):format(i), 2)
    end
  end
end

--- The table's lines, header first.  columns: { key, title, figure (a
-- number rounded, right-aligned), format (a function of the value: the
-- cell's text, right-aligned), align ("right" or "left"), max (the widest
-- a cell may be) }.  The first column is the row's label; a child row's is
-- indented by two spaces.  opts: unfold (list every row's children; else
-- a row says how many it folds, "(n)" after its label).
function text_table.render(columns, rows, opts)
  check_columns(columns)
  if type(rows) ~= "table" then
    arg_error(2, "perfmon.table.render", "list of rows expected, got " .. type(rows))
  end
  if opts ~= nil and type(opts) ~= "table" then
    arg_error(3, "perfmon.table.render", "options table expected, got " .. type(opts))
  end
  for k in pairs(opts or {}) do
    if k ~= "unfold" then
      arg_error(3, "perfmon.table.render", ("unknown option %s (options: unfold)"):format(
        type(k) == "string" and ("%q"):format(k) or ("[" .. tostring(k) .. "]")))
    end
  end
  local unfold = opts and opts.unfold
  local grid = {}
  local function add(row, child)
    local line = {}
    for i, col in ipairs(columns) do line[i] = cut(cell(col, row[col.key]), col.max) end
    local kids = type(row.children) == "table" and #row.children or 0
    if child then
      line[1] = "  " .. line[1]
    elseif kids > 0 and not unfold then
      line[1] = ("%s (%d)"):format(line[1], kids)
    end
    grid[#grid + 1] = line
    if kids > 0 and unfold then
      for _, c in ipairs(row.children) do add(c, true) end
    end
  end
  for _, row in ipairs(rows) do add(row, false) end
  local widths, right = {}, {}
  for i, col in ipairs(columns) do
    widths[i] = #(col.title or "")
    right[i] = col.align == "right" or (col.align == nil and (col.figure or col.format ~= nil))
    for _, line in ipairs(grid) do widths[i] = math.max(widths[i], #line[i]) end
  end
  local function join(line)
    local parts = {}
    for i, s in ipairs(line) do
      local pad = (" "):rep(widths[i] - #s)
      parts[i] = right[i] and pad .. s or (i < #line and s .. pad or s)
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local head = {}
  for i, col in ipairs(columns) do head[i] = col.title or "" end
  local lines = { join(head) }
  for _, line in ipairs(grid) do lines[#lines + 1] = join(line) end
  return lines
end

local function percent(v) return ("%.1f%%"):format(v) end

--- The performance table's columns, both integrations' (Prosody's
-- `perfmon show`, Lite XL's text export): label titles the first column
-- ("module", "plugin"), count the count column ("ticks", or "samples" for
-- a sampled monitor), and hottest adds the profiler's column.  Their
-- rows: name, self_ms, cpu_ms, share (% of the host's CPU time), count,
-- longest, histogram and hottest.  No cell is cut: a cut histogram loses
-- its longest events, the ones that matter, and a cut hottest its line
-- (where.brief's paths are short already).
function text_table.performance_columns(label, count, hottest)
  if type(label) ~= "string" then
    arg_error(1, "perfmon.table.performance_columns", "string expected, got " .. type(label))
  end
  if count ~= "ticks" and count ~= "samples" then
    arg_error(2, "perfmon.table.performance_columns", ('"ticks" or "samples" expected, got %s')
      :format(type(count) == "string" and ("%q"):format(count) or type(count)))
  end
  local columns = {
    { key = "name", title = label },
    { key = "self_ms", title = "self ms", figure = true },
    { key = "cpu_ms", title = "cpu ms", figure = true },
    { key = "share", title = "share", format = percent },
    { key = "count", title = count, figure = true },
    { key = "longest", title = "longest" },
    { key = "histogram", title = "self jank histogram (ms:events)" },
  }
  if hottest then
    columns[#columns + 1] = { key = "hottest", title = "hottest (the profiler's samples)" }
  end
  return columns
end

return module(text_table)

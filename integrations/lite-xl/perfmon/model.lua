-- The perfmon plugin's logic that needs no editor, so that busted can test
-- it outside Lite XL: which group a chunk's path belongs to, and the
-- performance view's rows, the whole editor's row and a row's histogram.

local buckets = require("perfmon.buckets")
local text_table = require("perfmon.table")
local where = require("perfmon.where")

local model = {}

local function check_string(v, n, fname)
  if type(v) ~= "string" or v == "" then
    error(("bad argument #%d to '%s' (non-empty string expected, got %s)")
      :format(n, fname, v == "" and "an empty string" or type(v)), 3)
  end
end

-- root without its trailing separators, and whether path lies below it,
-- at a separator (".../plugins" is not below ".../plug").
local function below(path, root)
  root = root:gsub("[/\\]+$", "")
  local rest = path:sub(#root + 1)
  if path:sub(1, #root) == root and rest:match("^[/\\]") then return rest end
end

--- The group of the chunk at path, given the data directory and the user
-- directory: the name of the plugin (a file root/plugins/name.lua, or
-- anything in a folder root/plugins/name/) or "core" (datadir/core/), and
-- the source prefix that covers that group's code in this root.  nil when
-- it is neither (the user's init.lua, a library on package.path).
function model.group_of(path, datadir, userdir)
  check_string(path, 1, "group_of")
  check_string(datadir, 2, "group_of")
  check_string(userdir, 3, "group_of")
  -- the user directory may lie inside the data directory (a portable
  -- install's user/): the deeper root decides
  local roots = #userdir >= #datadir and { userdir, datadir } or { datadir, userdir }
  for _, root in ipairs(roots) do
    local rest = below(path, root)
    if rest then
      local base = path:sub(1, #path - #rest)
      local folder, sep = rest:match("^[/\\]plugins[/\\]([^/\\]+)([/\\])")
      if folder then return folder, base .. rest:match("^[/\\]plugins[/\\]") .. folder .. sep end
      local file = rest:match("^[/\\]plugins[/\\]([^/\\]+)%.lua$")
      if file then return file, path end
      if root == datadir then
        local core_sep = rest:match("^[/\\]core([/\\])")
        if core_sep then return "core", base .. rest:sub(1, 1) .. "core" .. core_sep end
      end
      return nil
    end
  end
  return nil
end

local function longest(durations)
  return buckets.name(buckets.longest(durations))
end

--- The view's rows for the groups (a list of perfmon groups) in snap (a
-- perfmon snapshot), busiest first by self time: a plugin that wraps
-- core.step or DocView.draw has every later wrapper's time inclusive of
-- its own, so only self time ranks plugins.  Each row: name, self_us,
-- cpu_us, share (self time, % of the editor's CPU time), ticks, samples
-- (those its self time is made of, in sampled mode), longest, histogram
-- (of the events by the group's self time in each, as text) and durations
-- (the snapshot's self_durations).  places (optional):
-- where each group's self time went, where.find_all's result for a
-- profiler's samples; each row then has hottest, where.brief's words ("-"
-- for a group with no sample).
function model.rows(snap, groups, places)
  if type(snap) ~= "table" or type(snap.groups) ~= "table" or type(snap.process) ~= "table" then
    error("bad argument #1 to 'rows' (perfmon snapshot expected, got " .. type(snap) .. ")", 2)
  end
  if type(groups) ~= "table" then
    error("bad argument #2 to 'rows' (list of perfmon groups expected, got " .. type(groups) .. ")", 2)
  end
  if places ~= nil and type(places) ~= "table" then
    error("bad argument #3 to 'rows' (where.find_all's result expected, got " .. type(places) .. ")", 2)
  end
  local rows = {}
  local total = math.max(snap.process.cpu_us, 1)
  for i, g in ipairs(groups) do
    local st = snap.groups[g.id]
    if not st then
      error(("bad argument #2 to 'rows' (group %d, %s, is not in the snapshot)"):format(i, tostring(g)), 2)
    end
    rows[#rows + 1] = {
      name = g.name, self_us = st.self_us, cpu_us = st.cpu_us,
      share = 100 * st.self_us / total, ticks = st.ticks, samples = st.self_samples,
      longest = longest(st.self_durations), histogram = buckets.histogram(st.self_durations),
      durations = st.self_durations,
      hottest = places and (places[g.id] and where.brief(places[g.id]) or "-"),
    }
  end
  table.sort(rows, function(a, b)
    if a.self_us ~= b.self_us then return a.self_us > b.self_us end
    return a.name < b.name
  end)
  return rows
end

--- The whole editor's row, of the same fields as model.rows' (no hottest),
-- from snap.process: its self time is the editor's CPU time in events.
function model.total(snap)
  if type(snap) ~= "table" or type(snap.process) ~= "table" then
    error("bad argument #1 to 'total' (perfmon snapshot expected, got " .. type(snap) .. ")", 2)
  end
  local p = snap.process
  return {
    name = "(whole editor)", self_us = p.self_us, cpu_us = p.cpu_us, share = 100,
    ticks = p.ticks, samples = p.self_samples, longest = longest(p.durations),
    histogram = buckets.histogram(p.durations), durations = p.durations,
  }
end

--- The bins of a durations histogram (durations[k] counts the events of
-- at least 2^(k-1) ms, those above included), each on its own: a list of
-- { lo = ms, hi = ms, count = events in [lo, hi) }, one per bucket k, for
-- the view's chart.
function model.bins(durations)
  if type(durations) ~= "table" then
    error("bad argument #1 to 'bins' (durations histogram expected, got " .. type(durations) .. ")", 2)
  end
  local bins = {}
  for k = 1, #durations do
    bins[k] = { lo = 1 << (k - 1), hi = 1 << k, count = durations[k] - (durations[k + 1] or 0) }
  end
  return bins
end

--- The view's text: a header, the rows, then the whole editor's line from
-- snap.process, in the performance table both integrations show
-- (perfmon.table).  count: the column of counts, "ticks" (the default:
-- what an exact monitor counts) or "samples" (for a sampled monitor, which
-- counts no plugin's ticks).  Rows with hottest (model.rows given places)
-- add its column.
function model.text(rows, snap, count)
  if type(rows) ~= "table" then
    error("bad argument #1 to 'text' (rows expected, got " .. type(rows) .. ")", 2)
  end
  if type(snap) ~= "table" or type(snap.process) ~= "table" then
    error("bad argument #2 to 'text' (perfmon snapshot expected, got " .. type(snap) .. ")", 2)
  end
  count = count or "ticks"
  if count ~= "ticks" and count ~= "samples" then
    error(("bad argument #3 to 'text' (\"ticks\" or \"samples\" expected, got %s)"):format(
      type(count) == "string" and ("%q"):format(count) or type(count)), 2)
  end
  local function table_row(r)
    return { name = r.name, self_ms = r.self_us / 1000, cpu_ms = r.cpu_us / 1000, share = r.share,
      count = r[count], longest = r.longest, histogram = r.histogram, hottest = r.hottest }
  end
  local t = {}
  for i, r in ipairs(rows) do t[i] = table_row(r) end
  t[#t + 1] = table_row(model.total(snap))
  local columns = text_table.performance_columns("plugin", count, rows[1] ~= nil and rows[1].hottest ~= nil)
  return table.concat(text_table.render(columns, t), "\n") .. "\n"
end

return model

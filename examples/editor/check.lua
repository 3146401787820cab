--- check: what the editor demo's output must show, for both hosts.
--
-- As a script (ctest example.editor and example.editor_c):
--   lua5.4 examples/editor/check.lua COMMAND [ARGS...]
-- runs the command, echoes its output, and exits 0 only when the output
-- passes verify() below and the command succeeded.
-- As a module (spec/editor_spec.lua): parse(output) and verify(output).

local M = {}

M.JANKY = "autocomplete" -- burns ~80 ms of CPU on every keystroke
M.BLOCKING = "autosave-backup" -- blocks ~100 ms on every save
M.QUIET = { "bracket-match", "linter", "word-count" }
M.BACKUP_LATENCY_MS = 100

local function number(s) return tonumber(s) end

--- The warnings ({ name = message }, and in order as list), the summary
-- and the table's rows ({ name, cpu_ms, share, ticks, blocking_ms, alloc_kb, longest,
-- histogram = { ["64-128"] = n, ... } }, in printed order; the process row
-- apart) of a host's output.
function M.parse(output)
  local r = { warnings = {}, warned = {}, rows = {} }
  local in_table = false
  for line in output:gmatch("[^\n]+") do
    local name, message = line:match("perfmon: (plugin '([^']+)' .*)$")
    if name then
      message, name = name, message
      r.warnings[#r.warnings + 1] = { name = name, message = message, line = line }
      r.warned[name] = message
    end
    local events, keys, moves, saves = line:match(
      "^about:performance %-%- (%d+) events %((%d+) keystrokes, (%d+) cursor moves, (%d+) saves%)")
    if events then
      r.summary = { events = number(events), keys = number(keys),
        moves = number(moves), saves = number(saves) }
    elseif line:match("^plugin%s+cpu ms%s+share") then
      in_table = true
    elseif in_table then
      local n, cpu, share, ticks, blocking, alloc, longest, hist = line:match(
        "^(%S+)%s+([%d.]+)%s+([%d.]+)%%%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+(%S+ ms)%s+(.*)$")
      if not n then
        n, cpu, share, ticks, blocking, alloc, longest, hist = line:match(
          "^(%(whole editor%))%s+([%d.]+)%s+([%d.]+)%%%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+(%S+ ms)%s+(.*)$")
      end
      if n then
        local row = { name = n, cpu_ms = number(cpu), share = number(share),
          ticks = number(ticks), blocking_ms = number(blocking), alloc_kb = number(alloc),
          longest = longest, histogram = {} }
        for bucket, count in hist:gmatch("(%d+%-%d+):(%d+)") do
          row.histogram[bucket] = number(count)
        end
        if n == "(whole editor)" then r.process = row else r.rows[#r.rows + 1] = row end
      end
    end
  end
  return r
end

--- The list of what is wrong with a host's output (empty when it is right).
function M.verify(output)
  local r, bad = M.parse(output), {}
  local function expect(ok, fmt, ...)
    if not ok then bad[#bad + 1] = fmt:format(...) end
  end
  expect(r.warned[M.JANKY] and r.warned[M.JANKY]:find("janked"),
    "no warning that %s janks", M.JANKY)
  expect(r.warned[M.BLOCKING] and r.warned[M.BLOCKING]:find("blocked"),
    "no warning that %s blocks", M.BLOCKING)
  for _, w in ipairs(r.warnings) do
    expect(w.name == M.JANKY or w.name == M.BLOCKING,
      "a well-behaved plugin was warned about: %s", w.line)
  end
  expect(r.summary, "no about:performance summary line")
  expect(r.process, "no (whole editor) row")
  expect(#r.rows == 2 + #M.QUIET, "%d plugin rows, expected %d", #r.rows, 2 + #M.QUIET)
  if #bad > 0 then return bad end

  local by_name, total, last = {}, 0, math.huge
  for _, row in ipairs(r.rows) do
    by_name[row.name] = row
    total = total + row.share
    expect(row.cpu_ms <= last, "rows not sorted by CPU at %s", row.name)
    last = row.cpu_ms
  end
  expect(r.rows[1].name == M.JANKY, "%s does not top the CPU column (%s does)",
    M.JANKY, r.rows[1].name)
  -- each share is rounded to 0.1%: the sum may be 0.05% per row too high
  expect(total <= 100 + 0.05 * #r.rows, "the shares add up to %.1f%%", total)
  local janky = by_name[M.JANKY]
  expect(janky and janky.ticks == r.summary.keys,
    "%s: %s ticks, expected one per keystroke (%d)", M.JANKY,
    janky and janky.ticks, r.summary.keys)
  expect(janky and (janky.histogram["64-128"] or 0) >= 3,
    "%s: fewer than 3 events of 64-128 ms", M.JANKY)
  local blocking = by_name[M.BLOCKING]
  expect(blocking and blocking.blocking_ms >= r.summary.saves * M.BACKUP_LATENCY_MS,
    "%s: %s ms blocking, expected >= %d", M.BLOCKING, blocking and blocking.blocking_ms,
    r.summary.saves * M.BACKUP_LATENCY_MS)
  for _, name in ipairs(M.QUIET) do
    expect(by_name[name] and by_name[name].blocking_ms == 0,
      "%s: blocking time charged to a plugin that never blocks", name)
  end
  expect(r.process.ticks == r.summary.events, "process: %d ticks, expected %d events",
    r.process.ticks, r.summary.events)
  -- the memory probe: every plugin's allocations are within the editor's
  expect(r.process.alloc_kb > 0, "process: no memory allocated")
  for _, row in ipairs(r.rows) do
    expect(row.alloc_kb <= r.process.alloc_kb, "%s: %.1f KB allocated, more than the editor's %.1f",
      row.name, row.alloc_kb, r.process.alloc_kb)
  end
  return bad
end

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- As a script: run the command given, check its output.
if arg and arg[0] and arg[0]:match("check%.lua$") then
  if #arg == 0 then
    io.stderr:write("usage: lua5.4 examples/editor/check.lua COMMAND [ARGS...]\n")
    os.exit(2)
  end
  local words = {}
  for i = 1, #arg do words[i] = shell_quote(arg[i]) end
  local p = assert(io.popen(table.concat(words, " ")))
  local output = p:read("a")
  local ok, how, code = p:close()
  io.write(output)
  local bad = M.verify(output)
  if not ok then bad[#bad + 1] = ("the command failed (%s %s)"):format(how, code) end
  for _, msg in ipairs(bad) do io.stderr:write("check: FAIL: ", msg, "\n") end
  if #bad > 0 then os.exit(1) end
  print("check: ok")
end

return M

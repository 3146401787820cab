--- bench/run.lua: what perfmon costs.
--
-- Runs each workload in three modes:
--   none     no hook at all
--   noop     a call/return hook that does nothing (build/noophook.so): the
--            floor any call/return hook pays
--   perfmon  a monitor holding "jank" and "ticks", every plugin attached to
--            its own group, each event of the workload run by perfmon.event
-- The plugins are loaded once, into their own sandboxes and groups, and run
-- the same code in all three modes; only the hook and the event driver
-- (perfmon.event, or a plain call) differ.
--
-- The machine is shared and its speed drifts by up to 2x over seconds, so
-- medians of each mode's own series mostly measure the drift.  The ratios
-- are taken side by side instead: each timed run is a slice, 1/K of the
-- full-size workload (--slices, K = 8: ~50 ms), and a round runs the three
-- modes back to back on slices, forward (none, noop, perfmon) in odd rounds
-- and reversed in even ones.  A pair of adjacent rounds gives one ratio per
-- mode pair, the ratio of the two rounds' sums: every mode's mean position
-- in the pair is the same, so a drift linear over the pair cancels.  The
-- figures are medians over the pairs, with the interquartile range of
-- perfmon/noop to show how much pairs disagree.  Times in ms are median slice
-- times scaled back to a full-size run.  The profiler table (1 kHz, editor
-- workload) is measured the same way; then memory figures.
--
-- Run it with bench/run, which builds first; by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME,...]
-- bench/instructions counts instructions of the same runs under callgrind.

local USAGE = [==[
usage: lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME[,NAME...]]
                            [--mode MODE]
  --reps N     per mode and workload, time N full-size runs' worth of work
               (default 7; 3 with --quick), as N*K slices of 1/K size each
               in N*K rounds (rounded up to an even number, at least 12)
  --slices K   cut a full-size run into K slices (default 8: ~50 ms each at
               full size, ~12 ms with --quick); a workload whose unit of work
               is larger than 1/K (tables: one event) uses one unit a slice
  --quick      workloads at 1/4 size (a "full-size run" is then a quarter of
               one) and 3 repetitions, for a check in under 30 s
  --only LIST  run only these workloads (fib, editor, coroutines, tables,
               groups1000); the memory section always runs
  --mode MODE  run the workloads in one mode only (none, noop, perfmon,
               profiler: perfmon.profiler at 1 kHz and no monitor, or tick:
               the same on its "tick" timer), N whole runs (not slices),
               print each run's time and nothing else: for a profiler, e.g.
               perf record lua5.4 bench/run.lua --only editor --mode perfmon]==]

local opts = { reps = nil, slices = 8, quick = false, only = nil, mode = nil }
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then
      opts.quick = true
    elseif a == "--reps" or a == "--slices" then
      local n = tonumber(arg[i + 1])
      if not n or n < 1 or n % 1 ~= 0 then
        io.stderr:write("bench: ", a, " needs a positive integer\n", USAGE, "\n")
        os.exit(2)
      end
      opts[a:sub(3)] = n
      i = i + 1
    elseif a == "--only" and arg[i + 1] then
      opts.only = {}
      for name in arg[i + 1]:gmatch("[^,]+") do opts.only[name] = true end
      i = i + 1
    elseif a == "--mode" and ({ none = 1, noop = 1, perfmon = 1, profiler = 1, tick = 1 })[arg[i + 1]] then
      opts.mode = arg[i + 1]
      i = i + 1
    elseif a == "-h" or a == "--help" then
      print(USAGE)
      os.exit(0)
    else
      io.stderr:write("bench: unknown argument: ", a, "\n", USAGE, "\n")
      os.exit(2)
    end
    i = i + 1
  end
  opts.reps = opts.reps or (opts.quick and 3 or 7)
end
-- Workload sizes are multiplied by this.
local SCALE = opts.quick and 0.25 or 1
-- Fewer pairs of rounds than this give no median nor quartiles worth the
-- name (tables at --quick: 2 events a run, one a slice).
local MIN_ROUNDS = 12

io.stdout:setvbuf("line")

local perfmon = require("perfmon")
local noophook = require("noophook")

-- Units of work (calls, keystrokes, events) in a full-size run and in a
-- slice of one: at least one, as an event cannot be split.
local function size(n) return math.max(1, math.floor(n * SCALE + 0.5)) end
local function slice_size(full) return math.max(1, math.floor(full / opts.slices + 0.5)) end

----------------------------------------------------------------------------
-- Plugins: each in its own sandbox and group, loaded by perfmon.load
----------------------------------------------------------------------------

local function sandbox(extra)
  local env = {
    string = string, table = table, math = math, coroutine = coroutine,
    ipairs = ipairs, pairs = pairs, select = select, type = type,
    tostring = tostring, tonumber = tonumber, error = error, assert = assert,
  }
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

-- Loads src as the plugin `name` (chunk "=bench/<name>", its own sandbox
-- and group of kind `kind`), runs its main chunk, returns env, group and
-- what the chunk returned.
local function plugin(name, src, extra, kind)
  local group = perfmon.group{ name = name, kind = kind or "plugin" }
  local env = sandbox(extra)
  local main = assert(perfmon.load(src, "=bench/" .. name, env, group))
  return env, group, main()
end

----------------------------------------------------------------------------
-- Workloads.  units is how many units of work (fib calls, keystrokes,
-- items, events, rounds) a full-size run does before SCALE; setup(count)
-- loads the plugins once and returns an instance doing count units a run:
--   { run = function(drive) ... return checksum end, groups = {...},
--     calls = n (optional: Lua calls per run, for ns per call) }
-- run(drive) makes whatever coroutines it needs (so that they inherit the
-- hook of the mode) and runs each event as drive(handler, ...).  The what
-- line describes a full-size run.
----------------------------------------------------------------------------

local workloads = {}

-- (a) call-heavy recursion
workloads[#workloads + 1] = {
  name = "fib",
  what = "fib(27) x20 in a plugin, one event each (call-heavy recursion)",
  units = 20,
  setup = function(times)
    local env, group = plugin("fib", [[
      local function fib(n)
        if n < 2 then return n end
        return fib(n - 1) + fib(n - 2)
      end
      function run(n) return fib(n) end
    ]])
    local function fibcalls(n) -- calls fib(n) makes: 2 fib(n+1) - 1
      local a, b = 0, 1
      for _ = 1, n + 1 do a, b = b, a + b end
      return 2 * a - 1
    end
    return {
      groups = { group },
      calls = times * (fibcalls(27) + 1),
      run = function(drive)
        local sum = 0
        for _ = 1, times do sum = sum + drive(env.run, 27) end
        return sum
      end,
    }
  end,
}

-- (b) an editor-like plugin host
local LIB_SRC = [[
  local lib = {}
  function lib.trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end
  function lib.split(s, sep)
    local t = {}
    for piece in s:gmatch("[^" .. sep .. "]+") do t[#t + 1] = piece end
    return t
  end
  function lib.words(s) return s:gmatch("%a+") end
  function lib.starts_with(s, prefix) return s:sub(1, #prefix) == prefix end
  function lib.ends_with(s, suffix) return suffix == "" or s:sub(-#suffix) == suffix end
  function lib.escape(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end
  function lib.pad(s, n) return s .. string.rep(" ", n - #s) end
  return lib
]]

local EDITOR_PLUGINS = {
  { name = "wordcount", src = [[
      local words, lines
      function start() words, lines = 0, 0 end
      function on_key(ev)
        if ev.char == " " or ev.char == "\n" then
          words = #lib.split(ev.text, " ")
          lines = ev.line
        end
        return words + lines
      end ]] },
  { name = "highlight", src = [[
      local keywords = {}
      for _, k in ipairs{ "local", "function", "end", "if", "then", "else",
                          "return", "for", "do", "while", "in", "nil" } do
        keywords[k] = true
      end
      function on_key(ev)
        local text, pos, spans = ev.text, 1, {}
        while pos <= #text do
          local s, e = string.find(text, "^[%a_][%w_]*", pos)
          local kind = "name"
          if s then
            if keywords[text:sub(s, e)] then kind = "keyword" end
          else
            s, e = string.find(text, "^%d+", pos)
            kind = "number"
            if not s then
              s, e = string.find(text, "^%s+", pos)
              kind = "space"
              if not s then s, e, kind = pos, pos, "punct" end
            end
          end
          table.insert(spans, { kind, s, e })
          pos = e + 1
        end
        return #spans
      end ]] },
  { name = "indent", src = [[
      local width = 2
      function on_key(ev)
        if ev.char ~= "\n" and ev.char ~= "d" and ev.char ~= "n" then return 0 end
        local text = ev.text
        local ws = text:match("^%s*")
        local level = #ws // width
        local body = lib.trim(text)
        if body:find("then$") or body:find("do$") or lib.ends_with(body, "function()") then
          level = level + 1
        elseif lib.starts_with(body, "end") or lib.starts_with(body, "else") then
          level = math.max(0, level - 1)
        end
        return #string.rep(" ", level * width)
      end ]] },
  { name = "brackets", src = [[
      local pairs_of = { [")"] = "(", ["]"] = "[", ["}"] = "{" }
      function on_key(ev)
        local text, stack, pos, bad = ev.text, {}, 1, 0
        while true do
          local s = string.find(text, "[%(%)%[%]{}]", pos)
          if not s then break end
          local c = text:sub(s, s)
          local open = pairs_of[c]
          if open == nil then
            table.insert(stack, c)
          elseif stack[#stack] == open then
            table.remove(stack)
          else
            bad = bad + 1
          end
          pos = s + 1
        end
        return bad + #stack
      end ]] },
  { name = "statusline", src = [[
      local mode = "INSERT"
      function on_key(ev)
        local parts = {}
        for i, seg in ipairs{ "bench.lua", mode, "utf-8", "lua" } do
          parts[#parts + 1] = lib.pad(seg, 8 + i)
        end
        parts[#parts + 1] = string.format("%d:%d", ev.line, ev.col)
        parts[#parts + 1] = string.format("%3d%%", ev.line * 100 // ev.lines)
        return #table.concat(parts, " | ")
      end ]] },
  { name = "spell", src = [[
      local dictionary, prefixes = {}, {}
      for _, w in ipairs{ "local", "function", "return", "end", "if", "then",
                          "buffer", "line", "text", "for", "in", "ipairs",
                          "string", "table", "insert", "count", "word", "do" } do
        dictionary[w] = true
        prefixes[w:sub(1, 3)] = true
      end
      function on_key(ev)
        if ev.char ~= " " and ev.char ~= "\n" then return 0 end
        local misses = 0
        for word in lib.words(ev.text) do
          word = word:lower()
          if not dictionary[word] and not prefixes[word:sub(1, 3)] then
            misses = misses + 1
          end
        end
        return misses
      end ]] },
  { name = "autopair", src = [[
      local closing = { ["("] = ")", ["["] = "]", ["{"] = "}", ['"'] = '"' }
      local snippets = { fn = "function", lc = "local", ret = "return" }
      function on_key(ev)
        local n = 0
        if closing[ev.char] then
          local after = ev.text:sub(ev.col + 1, ev.col + 1)
          if after ~= closing[ev.char] then n = n + 1 end
        end
        for abbrev in pairs(snippets) do
          local _, hits = ev.text:gsub("%f[%w]" .. lib.escape(abbrev) .. "%f[%W]", snippets)
          n = n + hits
        end
        return n
      end ]] },
  { name = "linter", src = [[  -- a coroutine that checks a line per event
      local worker
      function start()
        worker = coroutine.wrap(function(text)
          local warnings = 0
          while true do
            if text:find("%s+$") then warnings = warnings + 1 end
            if #text > 60 then warnings = warnings + 1 end
            if text:find("\t", 1, true) then warnings = warnings + 1 end
            if lib.trim(text) == "" then warnings = warnings + 1 end
            if text:find("TODO", 1, true) then warnings = warnings + 1 end
            text = coroutine.yield(warnings)
          end
        end)
      end
      function on_key(ev) return worker(ev.text) end ]] },
}

-- The text the "user" types, a keystroke per event.
local TYPED = [[
local function count_words(buffer)
  local count = 0
  for _, line in ipairs(buffer) do
    for word in line:gmatch("%a+") do
      count = count + 1 -- TODO: skip keywords
    end
  end
  return count
end

local M = { name = "words", version = 3 }
function M.render(lines, width)
  local out = {}
  for i = 1, #lines do
    local text = lines[i]:sub(1, width)
    if #text < width then text = text .. (" "):rep(width - #text) end
    out[#out + 1] = ("%4d | %s"):format(i, text)
  end
  return table.concat(out, "\n")
end
return M
]]

workloads[#workloads + 1] = {
  name = "editor",
  what = "8 sandboxed plugins + a shared library group, 18000 keystrokes, one event each",
  units = 18000,
  setup = function(keys)
    local groups = {}
    -- The shared helpers: their own chunk, sandbox and group, called by
    -- several plugins (a call into them enters the "lib" group).
    local _, lib_group, lib = plugin("lib", LIB_SRC, nil, "library")
    groups[1] = lib_group
    local plugins = {}
    for _, p in ipairs(EDITOR_PLUGINS) do
      local env, group = plugin(p.name, p.src, { lib = lib })
      groups[#groups + 1] = group
      plugins[#plugins + 1] = env
    end
    -- Every plugin sees every keystroke: one event.
    local function keystroke(ev)
      local sum = 0
      for i = 1, #plugins do sum = sum + plugins[i].on_key(ev) end
      return sum
    end
    return {
      groups = groups,
      run = function(drive)
        for _, env in ipairs(plugins) do
          if env.start then env.start() end
        end
        local buffer, line, text = {}, 1, ""
        local pos, nlines = 1, 21
        local sum = 0
        for _ = 1, keys do
          local c = TYPED:sub(pos, pos)
          pos = pos + 1
          if pos > #TYPED then pos = 1 end
          if c == "\n" then
            buffer[line] = text
            line = line % nlines + 1
            text = ""
          else
            text = text .. c
          end
          sum = sum + drive(keystroke, {
            char = c, line = line, col = #text, lines = nlines, text = text,
          })
        end
        return sum
      end,
    }
  end,
}

-- (c) coroutine-heavy: producer -> filter -> consumer, three plugins
workloads[#workloads + 1] = {
  name = "coroutines",
  what = "producer coroutine -> filter (coroutine.wrap) -> consumer, 1.2M items, 1000 an event",
  units = 1200000,
  setup = function(items)
    local penv, pgroup = plugin("producer", [[
      function make(n)
        return coroutine.create(function()
          for i = 1, n do coroutine.yield(i * 7 % 1009) end
          return nil
        end)
      end ]])
    local fenv, fgroup = plugin("filter", [[
      function make(source)
        return coroutine.wrap(function()
          while true do
            local ok, v = coroutine.resume(source)
            assert(ok, v)
            if v == nil then return nil end
            if v % 3 ~= 0 then coroutine.yield(v * 2) end
          end
        end)
      end ]])
    local cenv, cgroup = plugin("consumer", [[
      function take(pull, batch)
        local sum, n = 0, 0
        for _ = 1, batch do
          local v = pull()
          if v == nil then return sum, true end
          sum = sum + v
          n = n + 1
        end
        return sum, false
      end ]])
    local batch = 1000
    return {
      groups = { pgroup, fgroup, cgroup },
      run = function(drive)
        local pull = fenv.make(penv.make(items))
        local sum, done, s = 0, false, 0
        while not done do
          s, done = drive(cenv.take, pull, batch)
          sum = sum + s
        end
        return sum
      end,
    }
  end,
}

-- (d) table-heavy loops, few calls
workloads[#workloads + 1] = {
  name = "tables",
  what = "matrix multiply 90x90 + sieve to 300000 in a plugin, 6 events",
  units = 6,
  setup = function(events)
    local env, group = plugin("numeric", [[
      local function matrix(n, seed)
        local m = {}
        for i = 1, n do
          local row = {}
          for j = 1, n do row[j] = (i * seed + j) % 10 end
          m[i] = row
        end
        return m
      end
      local function matmul(a, b, n)
        local c = {}
        for i = 1, n do
          local ci, ai = {}, a[i]
          for j = 1, n do
            local s = 0
            for k = 1, n do s = s + ai[k] * b[k][j] end
            ci[j] = s
          end
          c[i] = ci
        end
        return c
      end
      local function sieve(n)
        local composite, count = {}, 0
        for i = 2, n do
          if not composite[i] then
            count = count + 1
            for j = i * i, n, i do composite[j] = true end
          end
        end
        return count
      end
      function run(n, limit)
        local c = matmul(matrix(n, 3), matrix(n, 7), n)
        return c[n][n] + c[1][1] + sieve(limit)
      end ]])
    return {
      groups = { group },
      run = function(drive)
        local sum = 0
        for _ = 1, events do sum = sum + drive(env.run, 90, 300000) end
        return sum
      end,
    }
  end,
}

-- (e) a thousand groups each running briefly
local GROUP_SRC = [[
  local k = %d
  function handle(x)
    local s = 0
    for i = 1, 8 do s = s + (x * i + k) %% 7 end
    return s
  end ]]

-- Memory figures of the thousand groups, filled by its setup.
local thousand_memory

workloads[#workloads + 1] = {
  name = "groups1000",
  what = "1000 chunks, each its own group, each called 3 times per round (event), 360 rounds",
  units = 360,
  setup = function(rounds)
    local n = 1000
    collectgarbage("collect")
    local kb0 = collectgarbage("count")
    local groups = {}
    for i = 1, n do
      groups[i] = perfmon.group{ name = "g" .. i, kind = "plugin" }
    end
    collectgarbage("collect")
    local kb1 = collectgarbage("count")
    local handlers = {}
    for i = 1, n do
      local env = sandbox()
      assert(perfmon.load(GROUP_SRC:format(i), "=bench/g" .. i, env, groups[i]))()
      handlers[i] = env.handle
    end
    collectgarbage("collect")
    local kb2 = collectgarbage("count")
    local function round(x)
      local sum = 0
      for pass = 1, 3 do
        for i = 1, n do sum = sum + handlers[i](x + pass) end
      end
      return sum
    end
    -- What running under a monitor adds: one round, then the figures
    -- while the monitor is still open (closing it frees perfmon's caches).
    local info0 = perfmon.info()
    local mon = perfmon.monitor{ "jank", "ticks" }
    perfmon.event(round, 1)
    collectgarbage("collect")
    local kb3 = collectgarbage("count")
    local info1 = perfmon.info()
    mon:close()
    thousand_memory = {
      groups_kb = kb1 - kb0, chunks_kb = kb2 - kb1, monitor_kb = kb3 - kb2,
      bytes_before = info0.bytes, bytes_monitored = info1.bytes,
      bytes_after = perfmon.info().bytes, ngroups = info1.groups,
    }
    return {
      groups = groups,
      run = function(drive)
        local sum = 0
        for r = 1, rounds do sum = sum + drive(round, r) end
        return sum
      end,
    }
  end,
}

----------------------------------------------------------------------------
-- Modes and timing
----------------------------------------------------------------------------

local function direct(fn, ...) return fn(...) end

local MODES = { "none", "noop", "perfmon" }

local function assert_no_hook(where)
  if debug.gethook() ~= nil then
    error(("bench: a hook is still set %s: %s"):format(where, tostring(debug.gethook())))
  end
end

-- Runs w once in mode; returns its CPU seconds and checksum.  With check,
-- the perfmon mode also takes snapshots around the run (untimed use only).
local function run_mode(w, mode, check)
  collectgarbage("collect")
  assert_no_hook("before a run")
  local t0, t1, sum, d
  if mode == "none" then
    t0 = os.clock()
    sum = w.run(direct)
    t1 = os.clock()
  elseif mode == "noop" then
    noophook.set()
    t0 = os.clock()
    sum = w.run(direct)
    t1 = os.clock()
    noophook.clear()
  else
    local mon = perfmon.monitor{ "jank", "ticks" }
    local before = check and mon:snapshot()
    t0 = os.clock()
    sum = w.run(perfmon.event)
    t1 = os.clock()
    if check then d = mon:snapshot():subtract(before) end
    mon:close()
  end
  assert_no_hook("after mode " .. mode)
  return t1 - t0, sum, d
end

-- Runs w once under perfmon.profiler at 1 kHz, with or without a monitor,
-- on timer ("precise" or "tick"; default precise); returns its CPU
-- seconds, checksum, sampling periods and samples taken.
local function profiled(w, with_monitor, timer)
  collectgarbage("collect")
  local p = require("perfmon.profiler").new()
  local mon = with_monitor and perfmon.monitor{ "jank", "ticks" }
  p:start(1000, nil, { timer = timer })
  local t0 = os.clock()
  local sum = w.run(with_monitor and perfmon.event or direct)
  local t1 = os.clock()
  p:stop()
  if mon then mon:close() end
  assert_no_hook("after the profiler")
  return t1 - t0, sum, p:results().samples, #p:samples()
end

-- The q-quantile of xs, interpolated between order statistics (q = 0.5 is
-- the median: the mean of the middle two of an even count).
local function quantile(xs, q)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  local h = (#s - 1) * q + 1
  local lo = math.floor(h)
  if lo >= #s then return s[#s] end
  return s[lo] + (h - lo) * (s[lo + 1] - s[lo])
end

local function median(xs) return quantile(xs, 0.5) end

-- Rounds for opts.reps full-size runs' worth of slices (factor slices a
-- run), in whole pairs.
local function rounds_for(factor)
  return math.max(MIN_ROUNDS, 2 * math.ceil(opts.reps * factor / 2))
end

-- Runs `rounds` rounds, each timing every mode once back to back with
-- time(mode): forward in odd rounds, reversed in even ones, so that over a
-- pair of adjacent rounds every mode's mean position is the same.
-- Returns times[mode][round].
local function interleave(modes, rounds, time)
  local times = {}
  for _, m in ipairs(modes) do times[m] = {} end
  for r = 1, rounds do
    for i = 1, #modes do
      local m = modes[r % 2 == 1 and i or #modes + 1 - i]
      times[m][r] = time(m)
    end
  end
  return times
end

-- Mode a's time over mode b's, one ratio per pair of adjacent rounds: the
-- ratio of the pair's sums, which a speed drift linear over the pair scales
-- alike.  (Per-round ratios would alternate between two biases, and their
-- median could land anywhere between them.)
local function pair_ratios(times, a, b)
  local xs = {}
  for r = 2, #times[a], 2 do
    xs[#xs + 1] = (times[a][r - 1] + times[a][r]) / (times[b][r - 1] + times[b][r])
  end
  return xs
end

-- Median and quartiles of the per-pair ratios of a to b.
local function paired(times, a, b)
  local xs = pair_ratios(times, a, b)
  return { median = median(xs), q1 = quantile(xs, 0.25), q3 = quantile(xs, 0.75), n = #xs }
end

local function best(xs) return math.min(table.unpack(xs)) end

----------------------------------------------------------------------------
-- The machine line
----------------------------------------------------------------------------

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function cpu_model()
  local s = read_file("/proc/cpuinfo") or ""
  local model = s:match("model name%s*:%s*([^\n]+)") or s:match("Hardware%s*:%s*([^\n]+)")
  local n = 0
  for _ in s:gmatch("\nprocessor%s*:") do n = n + 1 end
  if s:match("^processor%s*:") then n = n + 1 end
  return (model or "unknown CPU"), n
end

local function loadavg()
  return ((read_file("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)")) or "?"
end

local function git_state()
  local p = io.popen("git rev-parse --short HEAD 2>/dev/null && git status --porcelain -- src lua 2>/dev/null")
  if not p then return "?" end
  local out = p:read("a")
  p:close()
  local head, rest = out:match("^(%S+)\n?(.*)$")
  if not head then return "not a git checkout" end
  local dirty = 0
  for _ in rest:gmatch("[^\n]+") do dirty = dirty + 1 end
  return dirty > 0 and ("%s + %d changed file(s) in src/ lua/"):format(head, dirty) or head
end

local info = perfmon.info()
local model, ncpu = cpu_model()
print(("machine: %s, %d CPU(s), load %s | %s (headers %s) | clock %s%s | perfmon %s")
  :format(model, ncpu, loadavg(), _VERSION, noophook.release, tostring(info.clock),
          info.path ~= nil and (" | path " .. tostring(info.path)) or "",
          git_state()))
if opts.mode then
  print(("run: %d full-size runs per workload in mode %s; %s sizes; os.clock CPU time")
    :format(opts.reps, opts.mode, opts.quick and "--quick (1/4)" or "full"))
else
  print(("run: %d full-size runs' worth per mode, as slices of 1/%d in rounds of the modes back to back,")
    :format(opts.reps, opts.slices))
  print(("     order alternating, after a warm-up slice per mode; %s sizes; os.clock CPU time")
    :format(opts.quick and "--quick (1/4)" or "full"))
end
print()

----------------------------------------------------------------------------
-- Timing
----------------------------------------------------------------------------

if opts.only then
  local known = {}
  for _, w in ipairs(workloads) do known[w.name] = true end
  for name in pairs(opts.only) do
    if not known[name] then
      io.stderr:write("bench: unknown workload: ", name, "\n", USAGE, "\n")
      os.exit(2)
    end
  end
end

if opts.mode then -- one mode, for a profiler: full-size runs, no tables
  for _, w in ipairs(workloads) do
    if not opts.only or opts.only[w.name] then
      local inst = w.setup(size(w.units))
      for rep = 1, opts.reps do
        local t
        if opts.mode == "profiler" or opts.mode == "tick" then
          t = profiled(inst, false, opts.mode == "tick" and "tick" or "precise")
        else
          t = run_mode(inst, opts.mode)
        end
        print(("%s %s run %d: %.1f ms"):format(w.name, opts.mode, rep, t * 1000))
      end
    end
  end
  os.exit(0)
end

local results = {}
local started = os.clock()
for _, w in ipairs(workloads) do
  if not opts.only or opts.only[w.name] then
    local full = size(w.units)
    local slice = slice_size(full)
    local inst = w.setup(slice)
    inst.name, inst.what = w.name, w.what
    -- A slice's time times factor is a full-size run's (factor is K unless
    -- the unit of work is too big to cut that fine).
    inst.factor = full / slice
    inst.rounds = rounds_for(inst.factor)
    -- Warm-up: a slice per mode, untimed; checksums must agree.
    local sums, check, check_t = {}, nil, nil
    for _, mode in ipairs(MODES) do
      local t, sum, d = run_mode(inst, mode, true)
      sums[mode] = sum
      if d then check, check_t = d, t end
    end
    for _, mode in ipairs(MODES) do
      if sums[mode] ~= sums.none then
        error(("bench: %s gives %s under %s but %s with no hook")
          :format(w.name, tostring(sums[mode]), mode, tostring(sums.none)))
      end
    end
    inst.sum = sums.none
    local charged, ticks = 0, 0
    for _, g in ipairs(inst.groups) do
      local st = check.groups[g.id]
      if st and st.cpu_us > 0 then charged = charged + 1 end
      if st then ticks = ticks + st.ticks end
    end
    inst.check = ("%d/%d groups charged, %d ticks, process cpu_us %.1f ms (os.clock %.1f ms)")
      :format(charged, #inst.groups, ticks, check.process.cpu_us / 1000, check_t * 1000)
    inst.times = interleave(MODES, inst.rounds, function(mode)
      local t, sum = run_mode(inst, mode)
      assert(sum == inst.sum, "bench: checksum changed between runs")
      return t
    end)
    results[#results + 1] = inst
    io.stderr:write(("bench: %s done (%.0f s so far)\n"):format(w.name, os.clock() - started))
  end
end

local function ms(t) return t * 1000 end

local function iqr(q) return ("%.2f-%.2f"):format(q.q1, q.q3) end

if #results > 0 then
  print(("%-11s %9s %9s %9s  %9s %9s %9s  %6s  %8s  %9s"):format(
    "workload", "none ms", "noop ms", "perfmon", "perf/noop", "perf/none", "noop/none", "spread",
    "best p/n", "p/n IQR"))
  for _, r in ipairs(results) do
    local m, fastest = {}, {}
    local spread = 0
    for _, mode in ipairs(MODES) do
      local xs = r.times[mode]
      m[mode], fastest[mode] = median(xs), best(xs)
      spread = math.max(spread, (math.max(table.unpack(xs)) - fastest[mode]) / m[mode])
    end
    r.median = m
    r.pn = paired(r.times, "perfmon", "noop")
    r.pz = paired(r.times, "perfmon", "none")
    r.nz = paired(r.times, "noop", "none")
    print(("%-11s %9.1f %9.1f %9.1f  %9.2f %9.2f %9.2f  %5.0f%%  %8.2f  %9s"):format(
      r.name, ms(m.none * r.factor), ms(m.noop * r.factor), ms(m.perfmon * r.factor),
      r.pn.median, r.pz.median, r.nz.median, spread * 100,
      fastest.perfmon / fastest.noop, iqr(r.pn)))
  end
  print()
  print("ms = median time of a slice x (full size / slice size): a full-size run's CPU time (os.clock);")
  print("ratios = median over pairs of adjacent rounds (a round: none, noop, perfmon on a slice each,")
  print("  back to back, reversed every other round) of the ratio of the pair's two-run sums;")
  print("p/n IQR = 25th-75th percentile of those per-pair perf/noop ratios (their spread, not an error")
  print("  bar of the median); spread = largest (max - min) / median of a mode's slice times, drift included;")
  print("best p/n = fastest perfmon slice / fastest noop slice (what interference from other work inflates least)")
  for _, r in ipairs(results) do
    print(("  %-11s %s"):format(r.name, r.what))
    print(("  %-11s %d rounds (%d pairs) of slices of 1/%.3g; perfmon warm-up (a slice): %s")
      :format("", r.rounds, r.pn.n, r.factor, r.check))
    if r.calls then
      -- The increments come from the paired ratios, not from differences of
      -- medians of separate series, which the drift dominates.
      local ns = r.median.none / r.calls * 1e9
      print(("  %-11s %d calls a full-size run: %.1f ns/call no hook, +%.1f ns no-op hook, +%.1f ns perfmon")
        :format("", math.floor(r.calls * r.factor + 0.5), ns, ns * (r.nz.median - 1),
                ns * (r.pz.median - 1)))
    end
  end
  print()
end

----------------------------------------------------------------------------
-- The sampling profiler at 1 kHz on the editor workload
----------------------------------------------------------------------------

-- none, the profiler (perfmon.profiler, p:start(1000), no monitor), the
-- profiler on its "tick" timer (p:start(1000, nil, { timer = "tick" })),
-- perfmon, and each profiler under perfmon's monitor, on editor slices in
-- paired rounds like the table above; the profilers are compared with
-- none, the profilers under the monitor with perfmon alone.  "timer signal
-- alone" is the floor of the precise timer: the same 1 kHz SIGPROF timer
-- with a handler that only reads the thread's CPU clock, which on a
-- virtual machine costs a few percent by itself (each tick is a timer
-- interrupt, a signal frame and a return).  The tick timer has no such
-- floor: the kernel checks it at its scheduler tick, which comes anyway.
local editor
for _, r in ipairs(results) do
  if r.name == "editor" then editor = r end
end
if editor then
  local function checked(t, sum)
    assert(sum == editor.sum, "bench: checksum changed under the profiler")
    return t
  end
  -- The floor of any time-based sampler: the same timer and signal with a
  -- handler that only reads the thread's CPU clock (noophook.timer_start).
  local function floor(w)
    collectgarbage("collect")
    noophook.timer_start(1000)
    local t0 = os.clock()
    local sum = w.run(direct)
    local t1 = os.clock()
    noophook.timer_stop()
    return t1 - t0, sum
  end
  local periods, taken, cpu = {}, {}, {}
  local function sampled(mode, with_monitor, timer)
    local t, sum, n, k = profiled(editor, with_monitor, timer)
    for list, v in pairs{ [periods] = n, [taken] = k, [cpu] = t } do
      list[mode] = list[mode] or {}
      table.insert(list[mode], v)
    end
    return checked(t, sum)
  end
  local time = {
    none = function() return checked(run_mode(editor, "none")) end,
    floor = function() return checked(floor(editor)) end,
    profiler = function() return sampled("profiler", false, "precise") end,
    tick = function() return sampled("tick", false, "tick") end,
    perfmon = function() return checked(run_mode(editor, "perfmon")) end,
    both = function() return sampled("both", true, "precise") end,
    both_tick = function() return sampled("both_tick", true, "tick") end,
  }
  local modes = { "none", "floor", "profiler", "tick", "perfmon", "both", "both_tick" }
  if not noophook.timer_start then table.remove(modes, 2) end
  profiled(editor, false) -- warm-up
  profiled(editor, true, "tick")
  local t = interleave(modes, editor.rounds, function(mode) return time[mode]() end)
  local m, fastest = {}, {}
  for k, xs in pairs(t) do m[k], fastest[k] = median(xs), best(xs) end
  print("profiler at 1 kHz (perfmon.profiler, p:start(1000); tick: p:start(1000, nil, { timer = \"tick\" })),")
  print("editor workload")
  print(("%-22s %9s %9s  %8s  %9s  %8s"):format("mode", "ms", "vs", "ratio", "IQR", "best"))
  print(("%-22s %9.1f"):format("none", ms(m.none * editor.factor)))
  local function row(name, k, base)
    local q = paired(t, k, base)
    print(("%-22s %9.1f %9s  %8.3f  %9s  %8.3f"):format(name, ms(m[k] * editor.factor), base,
      q.median, iqr(q), fastest[k] / fastest[base]))
  end
  if noophook.timer_start then row("timer signal alone", "floor", "none") end
  row("profiler", "profiler", "none")
  row("profiler, tick timer", "tick", "none")
  row("perfmon", "perfmon", "none")
  row("perfmon + profiler", "both", "perfmon")
  row("perfmon + tick timer", "both_tick", "perfmon")
  local function mean(xs)
    local s = 0
    for _, x in ipairs(xs) do s = s + x / #xs end
    return s
  end
  print(("  %d rounds (%d pairs) of the %d modes on slices of 1/%.3g, order reversed every other round;")
    :format(editor.rounds, editor.rounds // 2, #modes, editor.factor))
  print("  ms = median slice x (full size / slice size); ratio = median over pairs of adjacent rounds of")
  print("  the ratio of the pair's sums; IQR = 25th-75th percentile of those ratios; best = fastest / fastest")
  local names = { profiler = "profiler", tick = "tick timer", both = "perfmon + profiler",
                  both_tick = "perfmon + tick timer" }
  print("  sampling periods counted, of the ms of CPU from start to stop (1 a ms at most: periods")
  print("  after the last signal before stop are not counted), and samples taken, a slice on average:")
  for _, k in ipairs{ "profiler", "tick", "both", "both_tick" } do
    local n, taken_n = mean(periods[k]), mean(taken[k])
    print(("  %-22s %5.1f periods of %5.1f ms (%3.0f%%), in %5.1f samples (%.1f periods a sample)")
      :format(names[k], n, ms(mean(cpu[k])), 100 * n / ms(mean(cpu[k])), taken_n,
              taken_n > 0 and n / taken_n or 0))
  end
  print()
end

----------------------------------------------------------------------------
-- Memory
----------------------------------------------------------------------------

print("memory")
info = perfmon.info()
print(("  bytes_per_group %d (a group and its environment record, perfmon's C side)")
  :format(info.bytes_per_group))

-- A 200,000-frame non-tail recursion in a plugin, under a monitor.
do
  local depth = 200000
  local env = plugin("deep", [[
    local function down(n)
      if n == 0 then return 0 end
      return 1 + down(n - 1)
    end
    function run(n) return down(n) end ]])
  collectgarbage("collect")
  local before = perfmon.info()
  local mon = perfmon.monitor{ "jank", "ticks" }
  local t0 = os.clock()
  local ok, got = pcall(perfmon.event, env.run, depth)
  local t1 = os.clock()
  local after = perfmon.info()
  mon:close()
  if not ok or got ~= depth then
    print(("  deep recursion of %d frames FAILED under perfmon: %s"):format(depth, tostring(got)))
  else
    print(("  deep recursion, %d frames: shadow_capacity %d frames, bytes %d (%.1f MB; %d before), %.0f ms")
      :format(depth, after.shadow_capacity, after.bytes, after.bytes / 2^20, before.bytes,
              (t1 - t0) * 1000))
  end
  print(("  after the monitor closed: shadow_capacity %d, bytes %d")
    :format(perfmon.info().shadow_capacity, perfmon.info().bytes))
end

if thousand_memory then
  local m = thousand_memory
  print(("  groups1000: Lua heap +%.1f KB for 1000 perfmon.group, +%.1f KB for their 1000 chunks and sandboxes,")
    :format(m.groups_kb, m.chunks_kb))
  print(("              +%.1f KB after a monitored round; perfmon.info().bytes %d before, %d monitored, %d after close")
    :format(m.monitor_kb, m.bytes_before, m.bytes_monitored, m.bytes_after))
  print(("              (%d groups in the state; perfmon's group records, not in bytes: ~%d x %d B = %.0f KB)")
    :format(m.ngroups, m.ngroups, info.bytes_per_group, m.ngroups * info.bytes_per_group / 1024))
else
  print("  groups1000: not run (--only)")
end

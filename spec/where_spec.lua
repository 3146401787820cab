-- where_spec.lua: warnings that say where a plugin's time went
-- (perfmon.where, plugin_watcher's w.where and message).
--
-- Ground truth: the code under test times its own work with os.clock (the
-- host helper its time in the helper, a plugin its own loop), and the
-- place perfmon.where names is asserted by function, file and line, its
-- time within truth's tolerance (25% + 3 ms) of the measured one.  The
-- profiler is the precise one at 1 kHz: some 300 samples a test.

local perfmon = require("perfmon")
local Profiler = require("perfmon.profiler")
local where = require("perfmon.where")
local watcher = require("perfmon.watcher")
local PluginWatcher = require("perfmon.plugin_watcher")
local truth = require("spec.support.truth")


-- Host code: a helper of no group, as a host's utility module is (its own
-- chunk: this file is a group under perfmon.busted).  It keeps the CPU
-- time spent in it.
local host = { spent = 0 }
local HELPER_FILE, HELPER_LINE = "host/util.lua", 2
local fuzzy_match = assert(load([[
local host = ...
return function(n)
  local t0 = os.clock()
  local s = 0
  for i = 1, n do s = s + (i * 7) % 13 end
  host.spent = host.spent + (os.clock() - t0) * 1e6
  return s
end]], "=" .. HELPER_FILE))(host)

local seq = 0
-- A plugin: its own group and environment; src's lines are numbered as
-- written, the chunk named where_spec/<n>/<name>.  Returns the group, what
-- the chunk returns, and the chunk's short name.
local function plugin(name, src, extra, kind)
  seq = seq + 1
  local g = perfmon.group { name = name, kind = kind or "plugin" }
  local env = setmetatable(extra or {}, { __index = _G })
  local chunk = ("where_spec/%d/%s"):format(seq, name)
  local main = assert(perfmon.load(src, "=" .. chunk, env, g))
  return g, main(), chunk
end

-- A plugin that calls the host helper in a loop (line 4) for ms of CPU.
local CALLER = [[
local M = {}
function M.run(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do fuzzy_match(2000) end
end
return M]]

-- A plugin whose own lines do the work: check_word's loop (line 5).
local WORKER = [[
local M = { spent = 0 }
local function check_word(ms)
  local t0 = os.clock()
  local s, t = 0, t0 + ms / 1000
  while os.clock() < t do for i = 1, 200 do s = s + i % 7 end end
  M.spent = M.spent + (os.clock() - t0) * 1e6
  return s
end
function M.run(ms) local s = check_word(ms) return s end
return M]]

-- A host's core API, a library group where it is made one (its id in the
-- set passed, as where.libraries reads the snapshot's mark): fuzzy_match
-- (line 2), each() calls back into a plugin, idle() works on its own.
local CORE = [[
local M = {}
function M.fuzzy_match(n) local s = 0 for i = 1, n do s = s + (i * 7) % 13 end return s end
function M.each(fn, ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do fn() end
end
function M.idle(ms) M.each(function() M.fuzzy_match(2000) end, ms) end
return M]]

-- Runs fn under a monitor and a 1 kHz profiler; returns the profiler
-- (stopped) and the epoch µs the run began at.
local function profile(fn)
  local mon <close> = perfmon.monitor { "jank" }
  local p = Profiler.new()
  local since = mon:snapshot().time
  p:start(1000)
  fn()
  p:stop()
  return p, since
end

describe("perfmon.where", function()
  it("names the host helper a plugin calls, and the line it calls it from", function()
    local g, m, chunk = plugin("symbolhint", CALLER, { fuzzy_match = fuzzy_match })
    host.spent = 0
    local p, since = profile(function() perfmon.event(m.run, 300) end)
    local found = where.find(p, g, since)
    assert.is_true(found.samples >= where.MIN_SAMPLES, found.samples .. " samples")
    local h = assert(found.hottest, "no hottest place")
    assert.is_true(h.host)
    assert.are.equal("fuzzy_match", h.func.name)
    assert.are.equal(HELPER_FILE, h.func.file)
    assert.are.equal(HELPER_LINE, h.func.line)
    assert.is_nil(h.library)
    assert.are.same({ file = chunk, line = 4 }, h.site)
    assert.are.equal(chunk, h.caller.file)
    assert.are.equal(2, h.caller.line)
    assert.is_true(h.share > 0.8, "share " .. h.share)
    truth.assert_near(h.us, host.spent, "time in the helper")
    local text = where.text(found)
    assert.matches(("^[%%d.]+ m?s in host function fuzzy_match %%(host/util%%.lua:%d%%), "
      .. "called from %s:4 %%(%%d+%%%% of %%d+ samples%%)$"):format(HELPER_LINE,
        chunk:gsub("%p", "%%%0")), text)
  end)

  it("names a plugin's own hottest function and line when its own lines do the work", function()
    local g, m, chunk = plugin("spell", WORKER)
    local p, since = profile(function() perfmon.event(m.run, 300) end)
    local found = where.find(p, g, since)
    local h = assert(found.hottest, "no hottest place")
    assert.is_false(h.host)
    assert.are.equal("check_word", h.func.name)
    assert.are.equal(2, h.func.line)
    assert.are.same({ file = chunk, line = 5 }, h.site)
    assert.is_true(h.share > 0.8, "share " .. h.share)
    truth.assert_near(h.us, m.spent, "time in check_word")
    truth.assert_near(found.us, m.spent, "the plugin's time")
    assert.matches(("^[%%d.]+ m?s in its own check_word at %s:5 %%(%%d+%%%% of %%d+ samples%%)$")
      :format(chunk:gsub("%p", "%%%0")), where.text(found))
  end)

  it("charges a library's code to the plugin that called it, and names the library", function()
    local gc, api = plugin("core", CORE, nil, "core")
    local ga, a, chunk_a = plugin("finder", [[
local M = {}
function M.run(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do core.fuzzy_match(2000) end
end
return M]], { core = api })
    local gb, b, chunk_b = plugin("linter", [[
local M = {}
local function lint() local s = 0 for i = 1, 2000 do s = s + i % 7 end return s end
function M.run(ms) core.each(lint, ms) end
return M]], { core = api })
    local libs = { [gc.id] = true }
    local p, since = profile(function()
      perfmon.event(a.run, 150)
      perfmon.event(b.run, 150)
    end)
    local fa = where.find(p, ga, since, nil, libs)
    local ha = assert(fa.hottest, "no hottest place of finder")
    assert.is_true(ha.host)
    assert.are.equal("core", ha.library)
    assert.are.equal("fuzzy_match", ha.func.name)
    assert.are.same({ file = chunk_a, line = 4 }, ha.site)
    assert.matches("in core's fuzzy_match %(", where.text(fa))
    -- the library calling back into linter: linter's own time
    local hb = assert(where.find(p, gb, since, nil, libs).hottest, "no hottest place of linter")
    assert.is_false(hb.host)
    assert.are.equal(2, hb.func.line) -- lint, called as each()'s fn
    assert.are.equal(chunk_b, hb.site.file)
    -- each sample is one group's: the library owns none of theirs
    local fb, fc = where.find(p, gb, since, nil, libs), where.find(p, gc, since, nil, libs)
    assert.is_true(fa.samples + fb.samples + fc.samples <= fa.window_samples)
    assert.is_true(fc.samples < 0.05 * (fa.samples + fb.samples),
      "core owns " .. fc.samples .. " of " .. fa.samples + fb.samples)
    -- all at once: the same figures, one read of the samples
    local all_at_once = where.find_all(p, since, nil, libs)
    for _, g in ipairs { ga, gb } do
      local one = where.find(p, g, since, nil, libs)
      assert.are.equal(one.samples, all_at_once[g.id].samples)
      assert.are.same(one.hottest, all_at_once[g.id].hottest)
    end
    assert.are.equal(fc.samples, all_at_once[gc.id] and all_at_once[gc.id].samples or 0)
    -- without the mark, core owns what finder ran in it
    assert.is_true(where.find(p, ga, since).samples < 0.5 * fa.samples)
  end)

  it("charges a library working on its own, with no other group below it, to itself", function()
    truth.alone(pending) -- under perfmon.busted, the test's own file is a group below
    local gc, api = plugin("core", CORE, nil, "core")
    local p, since = profile(function() perfmon.event(api.idle, 150) end)
    local fc = where.find(p, gc, since, nil, { [gc.id] = true })
    local hc = assert(fc.hottest, "no hottest place of core")
    assert.is_false(hc.host)
    assert.are.equal("fuzzy_match", hc.func.name)
    assert.is_true(fc.samples >= 0.8 * fc.window_samples, fc.samples .. " of " .. fc.window_samples)
  end)

  it("says it has too few samples rather than name a place", function()
    local g, m = plugin("brief", WORKER)
    local p, since = profile(function() perfmon.event(m.run, 3) end)
    local found = where.find(p, g, since)
    assert.is_true(found.samples < where.MIN_SAMPLES)
    assert.is_nil(found.hottest)
    assert.are.equal(("too few profiler samples to say where (%d in the window, %d needed)")
      :format(found.samples, where.MIN_SAMPLES), where.text(found))
  end)

  it("names a host function once, by its name or where it is defined, long and short", function()
    local function found(func, library)
      return { samples = 20, hottest = { host = true, func = func, library = library, share = 0.5,
        us = 1500, site = { file = "p.lua", line = 3 } } }
    end
    local anonymous = { what = "Lua", file = "h.lua", line = 7 }
    local named = { what = "Lua", name = "fuzzy", file = "h.lua", line = 7 }
    local c = { what = "C", name = "rep" }
    assert.are.equal("a host function at h.lua:7, from p.lua:3 (50%)", where.brief(found(anonymous)))
    assert.are.equal("core's function at h.lua:7, from p.lua:3 (50%)", where.brief(found(anonymous, "core")))
    assert.are.equal("host function fuzzy, from p.lua:3 (50%)", where.brief(found(named)))
    assert.are.equal("core's fuzzy, from p.lua:3 (50%)", where.brief(found(named, "core")))
    assert.are.equal("C function rep, from p.lua:3 (50%)", where.brief(found(c)))
    assert.are.equal("2 ms in a host function at h.lua:7, called from p.lua:3 (50% of 20 samples)",
      where.text(found(anonymous)))
    assert.are.equal("2 ms in core's fuzzy (h.lua:7), called from p.lua:3 (50% of 20 samples)",
      where.text(found(named, "core")))
  end)

  it("reads only the window asked for", function()
    local g, m = plugin("later", WORKER)
    local p, since = profile(function() perfmon.event(m.run, 100) end)
    local found = where.find(p, g, since, since) -- a window of one µs
    assert.are.equal(0, found.samples)
    assert.is_nil(found.hottest)
    assert.is_true(where.find(p, g, since).samples >= where.MIN_SAMPLES)
  end)

  it("rejects bad arguments, naming them", function()
    local g = perfmon.group { name = "args", kind = "plugin" }
    local p = Profiler.new()
    assert.has_error(function() where.find({}, g, 0) end,
      "bad argument #1 to 'perfmon.where.find' (perfmon.profiler expected, got table)")
    assert.has_error(function() where.find(p, "x", 0) end,
      "bad argument #2 to 'perfmon.where.find' (perfmon.group or group id expected, got string)")
    assert.has_error(function() where.find(p, g) end,
      "bad argument #3 to 'perfmon.where.find' (µs since the epoch expected, got nil)")
    assert.has_error(function() where.find(p, g, 0 / 0) end,
      "bad argument #3 to 'perfmon.where.find' (µs since the epoch expected, got " .. tostring(0 / 0) .. ")")
    assert.has_error(function() where.find(p, g, 0, "now") end,
      "bad argument #4 to 'perfmon.where.find' (µs since the epoch expected, got string)")
    assert.has_error(function() where.find(p, g, 0, nil, true) end,
      "bad argument #5 to 'perfmon.where.find' (set of library group ids expected, got boolean)")
    assert.has_error(function() where.find_all(p, 0, "now") end,
      "bad argument #3 to 'perfmon.where.find_all' (µs since the epoch expected, got string)")
    assert.has_error(function() where.libraries(nil) end,
      "bad argument #1 to 'perfmon.where.libraries' (perfmon snapshot expected, got nil)")
    assert.has_error(function() where.text({}) end,
      "bad argument #1 to 'perfmon.where.text' (where.find's result expected, got table)")
    local snap = { groups = { [3] = { library = true }, [4] = { library = "yes" }, [5] = {} } }
    assert.are.same({ [3] = true }, where.libraries(snap))
  end)
end)

describe("Profiler.running", function()
  it("is the profiler that runs, and one forcibly stopped listens no more", function()
    truth.alone(pending)
    local core = require("perfmon.loader")
    assert.is_nil(Profiler.running())
    local p, q = Profiler.new(), Profiler.new()
    do
      local _ <close> = perfmon.monitor { "jank" }
      p:start(1000) -- a monitor is open: it listens to the watcher for markers
      assert.are.equal(p, Profiler.running())
      q:start(1000) -- stops p
      assert.is_false(p:is_profiling())
      assert.are.equal(q, Profiler.running())
      q:stop()
      assert.is_nil(Profiler.running())
    end
    -- nothing listens: the watcher's monitor is closed with the last listener
    assert.are.equal(0, core.info().monitors)
  end)
end)

describe("plugin_watcher's warnings", function()
  local DEFAULTS = watcher.configure()
  after_each(function()
    watcher.configure { jank_threshold_us = DEFAULTS.jank_threshold_us,
      buffering_delay_ms = DEFAULTS.buffering_delay_ms }
  end)

  it("say which host function a busy plugin's time went to, and from which line", function()
    -- symbolhint runs its own loop a third of its time (its self time
    -- before the host's helper is charged to it) and the helper the rest
    local g, m, chunk = plugin("busyhint", [[
local M = {}
local function own(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
function M.run(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do own(500) fuzzy_match(2000) end
end
return M]], { fuzzy_match = fuzzy_match })
    local p = Profiler.new()
    p:start(1000)
    local warnings = {}
    local _ <close> = PluginWatcher.new { on_warning = function(w) warnings[#warnings + 1] = w end,
      cpu_percent = 5, cpu_window_ms = 300, profiler = p }
    local t = os.clock() + 0.9
    while os.clock() < t and #warnings == 0 do perfmon.event(m.run, 4) end
    p:stop()
    local w = assert(warnings[1], "no warning")
    assert.are.equal(g.id, w.group.id)
    local h = assert(w.where and w.where.hottest, "no place in the warning")
    assert.is_true(h.host)
    assert.are.equal("fuzzy_match", h.func.name)
    assert.are.same({ file = chunk, line = 5 }, h.site)
    assert.matches(("is slowing things down: it used %%d+%%%% of the CPU over the last [%%d.]+ s; "
      .. "[%%d.]+ m?s in host function fuzzy_match %%(host/util%%.lua:%d%%), called from %s:5 ")
      :format(HELPER_LINE, chunk:gsub("%p", "%%%0")), w.message)
  end)

  it("name a library's function a plugin janks through, and warn about the plugin alone", function()
    local ok, gc = pcall(perfmon.group, { name = "core", kind = "core", library = true })
    if not ok or gc.library ~= true then pending("no library groups in this build") end
    local api = assert(perfmon.load(CORE, "=where_spec/lib/core", setmetatable({}, { __index = _G }), gc))()
    local g, m, chunk = plugin("finder", [[
local M = { spent = 0 }
function M.run(ms)
  local t0 = os.clock()
  local t = t0 + ms / 1000
  while os.clock() < t do core.fuzzy_match(2000) end
  M.spent = M.spent + (os.clock() - t0) * 1e6
end
return M]], { core = api })
    watcher.configure { jank_threshold_us = 50000, buffering_delay_ms = 0 }
    local p = Profiler.new()
    p:start(1000)
    local warnings = {}
    local mon <close> = perfmon.monitor { "jank" }
    local before = mon:snapshot()
    local _ <close> = PluginWatcher.new { on_warning = function(w) warnings[#warnings + 1] = w end,
      alerts = 3, kind = "*", profiler = p }
    for _ = 1, 3 do perfmon.event(m.run, 100) end
    watcher.flush()
    p:stop()
    local d = mon:snapshot():subtract(before)
    -- the plugin's self time is its time in core's API (item 1), by its own clock
    truth.assert_near(d.groups[g.id].self_us, m.spent, "finder's self time")
    assert.is_true(d.groups[gc.id].self_us < 0.1 * m.spent, "core's own " .. d.groups[gc.id].self_us)
    assert.are.equal(1, #warnings, #warnings .. " warnings")
    local w = warnings[1]
    assert.are.equal(g.id, w.group.id)
    local h = assert(w.where.hottest, "no place: " .. w.message)
    assert.are.equal("core", h.library)
    assert.are.same({ file = chunk, line = 5 }, h.site)
    assert.matches(("; [%%d.]+ m?s in core's fuzzy_match %%(where_spec/lib/core:2%%), called from %s:5 ")
      :format(chunk:gsub("%p", "%%%0")), w.message)
  end)

  it("say where a janky plugin's own code spent it, from a profiler of their own", function()
    local g, m, chunk = plugin("janky", WORKER)
    watcher.configure { jank_threshold_us = 50000, buffering_delay_ms = 0 }
    local warnings = {}
    local pw <close> = PluginWatcher.new { on_warning = function(w) warnings[#warnings + 1] = w end,
      alerts = 3, profile_rate_us = 2000, cpu_window_ms = 60000 }
    local prof = Profiler.running()
    assert.is_true(prof ~= nil, "no profiler runs")
    -- its tick timer takes a sample a scheduler tick at most, fewer on a
    -- loaded machine: events under the jank threshold first, in the same
    -- code, until it has enough to say where (bounded)
    for _ = 1, 200 do
      if prof:results().samples >= 2 * where.MIN_SAMPLES then break end
      perfmon.event(m.run, 30)
    end
    for _ = 1, 3 do perfmon.event(m.run, 120) end
    watcher.flush()
    local w = assert(warnings[1], "no warning")
    assert.are.equal(g.id, w.group.id)
    local h = assert(w.where.hottest, "no place: " .. w.message)
    assert.is_false(h.host)
    assert.are.equal("check_word", h.func.name)
    assert.are.same({ file = chunk, line = 5 }, h.site)
    assert.matches(("janked 3 times %%(up to %%d+ ms%%) in 30 s; [%%d.]+ m?s in its own "
      .. "check_word at %s:5 %%("):format(chunk:gsub("%p", "%%%0")), w.message)
    pw:close()
    assert.is_nil(Profiler.running(), "its profiler still runs")
  end)

  it("keep quiet about where with profiler = false, and leave a host's profiler running", function()
    local _, m = plugin("quietly", WORKER)
    watcher.configure { jank_threshold_us = 50000, buffering_delay_ms = 0 }
    local warnings = {}
    do
      local _ <close> = PluginWatcher.new { on_warning = function(w) warnings[#warnings + 1] = w end,
        alerts = 1, profiler = false }
      assert.is_nil(Profiler.running())
      perfmon.event(m.run, 80)
      watcher.flush()
    end
    local w = assert(warnings[1], "no warning")
    assert.is_nil(w.where)
    assert.is_nil(w.message:find(";", 1, true))
    -- a host's profiler runs on: the plugin watcher reads it, never stops it
    local p = Profiler.new()
    p:start(1000)
    do
      local _ <close> = PluginWatcher.new { on_warning = function() end }
      assert.are.equal(p, Profiler.running())
    end
    assert.is_true(p:is_profiling())
    p:stop()
  end)
end)

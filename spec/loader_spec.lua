-- require("perfmon") in a host that replaces Lua's searchers for C modules.
--
-- Lite XL (data/core/start.lua, 2.1.7) keeps package.searchers[1] and [2]
-- and puts in place of [3] and [4] one searcher of its own: it finds the
-- file on package.cpath, then calls system.load_native_plugin, which looks
-- for luaopen_lite_xl_<last part of the name>, then luaopen_<last part>.
-- For perfmon.core that is luaopen_core, which core.so does not have.
-- Each case runs a lua5.4 of its own with that searcher (perfmon.loader
-- must then open the core itself), and a case where the core is nowhere
-- checks the error says what was tried.

-- Lite XL's searcher, with system.load_native_plugin written in Lua.
local LITE_XL_SEARCHERS = [=[
local function load_native_plugin(name, path)
  local basename = name:match("[^.]*$")
  local entry = package.loadlib(path, "luaopen_lite_xl_" .. basename)
  if not entry then
    entry = package.loadlib(path, "luaopen_" .. basename)
    if not entry then
      error(("Unable to load %s: Can't find %s(lua_State *L, void *XL)")
        :format(name, "luaopen_" .. basename))
    end
  end
  local result = entry(name, path)
  if not result then
    error(("Unable to load %s: entrypoint must return a value"):format(name))
  end
  return result
end
package.searchers = { package.searchers[1], package.searchers[2], function(modname)
  local path, err = package.searchpath(modname, package.cpath)
  if not path then return err end
  return load_native_plugin, path
end }
]=]

-- A plugin in its group, three events, and what the monitor says of them:
-- "ok <ticks> <cpu_us>".
local MONITOR = [=[
local perfmon = require("perfmon")
assert(package.loaded["perfmon.core"] == require("perfmon.loader"))
local g = perfmon.group{ name = "plugin", kind = "plugin" }
local f = assert(perfmon.load([[
  return function()
    local s = 0
    for i = 1, 200000 do s = s + i % 7 end
    return s
  end]], "=plugin", setmetatable({}, { __index = _G }), g))()
local mon = perfmon.monitor{ "jank", "ticks" }
for _ = 1, 3 do perfmon.event(f) end
local row = mon:snapshot().groups[g.id]
io.write(("ok %d %d"):format(row.ticks, row.cpu_us))
]=]

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- Runs src in lua5.4 with these paths; returns whether it exited with 0
-- and what it printed (stdout and stderr).
local function run(src, path, cpath)
  local script, out = os.tmpname(), os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(src)
  f:close()
  local ok = os.execute(("env LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4 %s > %s 2>&1")
    :format(shell_quote(path), shell_quote(cpath), shell_quote(script), shell_quote(out)))
  f = assert(io.open(out))
  local text = f:read("a")
  f:close()
  os.remove(script)
  os.remove(out)
  return ok == true, text
end

-- Runs a shell command.  In a sanitized build the specs run with ASan's
-- runtime preloaded (tests/lua5.4-asan), whose leak check would fail the
-- coreutils: the command runs without it.
local function sh(cmd)
  return os.execute("env -u LD_PRELOAD sh -c " .. shell_quote(cmd))
end

-- The core.so this run of the specs loads.
local CORE = assert(package.searchpath("perfmon.core", package.cpath),
  "perfmon.core is not on package.cpath")

-- A directory of its own holding perfmon/*.lua (and core.so, with_core),
-- as a Lite XL user directory would; removed by the caller.
local function user_dir(with_core)
  local p = assert(io.popen("env -u LD_PRELOAD mktemp -d"))
  local dir = p:read("l")
  p:close()
  local cmd = ("mkdir %s && cp lua/perfmon/*.lua %s")
    :format(shell_quote(dir .. "/perfmon"), shell_quote(dir .. "/perfmon/"))
  if with_core then
    cmd = cmd .. (" && cp %s %s"):format(shell_quote(CORE), shell_quote(dir .. "/perfmon/core.so"))
  end
  assert(sh(cmd))
  return dir
end

local function remove(dir)
  sh("rm -rf " .. shell_quote(dir))
end

-- MONITOR's output shows the plugin was charged: three ticks, some CPU.
local function assert_monitored(ok, out)
  assert.is_true(ok, out)
  local ticks, cpu_us = out:match("^ok (%d+) (%d+)$")
  assert.are.equal("3", ticks, out)
  assert.is_true(tonumber(cpu_us) > 0, out)
end

local function lite_xl_paths(dir)
  return dir .. "/?.lua;" .. dir .. "/?/init.lua", dir .. "/?.so"
end

describe("require('perfmon') under Lite XL's searchers", function()
  it("cannot load perfmon.core itself: the searcher wants luaopen_core", function()
    local ok, out = run(LITE_XL_SEARCHERS .. [[
      io.write(select(2, pcall(require, "perfmon.core")))]], package.path, package.cpath)
    assert.is_true(ok, out)
    assert.matches("Can't find luaopen_core", out, 1, true)
  end)

  it("opens the core found on package.cpath, and monitors", function()
    assert_monitored(run(LITE_XL_SEARCHERS .. MONITOR, package.path, package.cpath))
  end)

  it("opens the core.so next to the Lua files, with nothing on package.cpath", function()
    local dir = user_dir(true)
    local path = lite_xl_paths(dir)
    local ok, out = run(LITE_XL_SEARCHERS .. MONITOR, path, dir .. "/nothing/?.so")
    remove(dir)
    assert_monitored(ok, out)
  end)

  it("says what it tried when the core is nowhere", function()
    local dir = user_dir(false)
    local path, cpath = lite_xl_paths(dir)
    local ok, out = run(LITE_XL_SEARCHERS .. [[
      local ok, err = pcall(require, "perfmon")
      assert(not ok, "require('perfmon') succeeded")
      io.write(err)]], path, cpath)
    -- uncaught, the same error ends the interpreter, not a crash
    local ok2, out2 = run(LITE_XL_SEARCHERS .. 'require("perfmon")', path, cpath)
    remove(dir)
    assert.is_true(ok, out)
    local head = "perfmon: cannot load its C core, perfmon.core; tried:\n"
    assert.are.equal(head, out:sub(1, #head))
    -- require's own message, then each place the loader looked
    assert.matches('require("perfmon.core"): ', out, 1, true)
    assert.matches("package.cpath: no file '" .. dir .. "/perfmon/core.so'", out, 1, true)
    assert.matches(dir .. "/perfmon/core.so (next to " .. dir .. "/perfmon/loader.lua): no such file",
      out, 1, true)
    assert.is_false(ok2, out2)
    assert.matches("^lua5.4: perfmon: cannot load its C core", out2)
  end)

end)

describe("require('perfmon') under Lua's own searchers", function()
  it("with the core nowhere, says what it tried, require's error first", function()
    local dir = user_dir(false)
    local path = lite_xl_paths(dir)
    local ok, out = run([[
      local ok, err = pcall(require, "perfmon")
      io.write(err)]], path, dir .. "/nothing/?.so")
    remove(dir)
    assert.is_true(ok, out)
    assert.matches("^perfmon: cannot load its C core", out)
    assert.matches("module 'perfmon.core' not found:", out, 1, true)
    assert.matches("no file '" .. dir .. "/nothing/perfmon/core.so'", out, 1, true)
  end)
end)

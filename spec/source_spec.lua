-- spec/source_spec.lua -- groups by source: perfmon.attach_source.
--
-- A host whose plugins share _G (Lite XL: files and folders under plugins/,
-- loaded with require) cannot attach a plugin's environment: there is one.
-- attach_source(prefix, group) puts every chunk whose path begins with
-- prefix in the group, in addition to its environment's groups: the
-- plugin's own files, the modules it loads with plain require, chunks
-- loaded before the call and functions already run.  Every figure is
-- checked against CPU time measured here with os.clock.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")

local MS = 1000

-- A throwaway plugins/ tree: a/init.lua (requires a.util), a/util.lua and
-- b.lua, each with a busy loop of its own, all sharing _G.
local function plugin_tree()
  local root = os.tmpname()
  os.remove(root)
  assert(os.execute(("mkdir -p '%s/plugins/a'"):format(root)))
  local function write(path, text)
    local f = assert(io.open(root .. "/plugins/" .. path, "w"))
    f:write(text)
    f:close()
  end
  local spin = "local function spin(ms) local t = os.clock() + ms / 1000 "
    .. "while os.clock() < t do end end\n"
  write("a/init.lua", spin .. [[
    local util = require("a.util")
    return function(ms) spin(ms / 2) util.work(ms / 2) end]])
  write("a/util.lua", spin .. "return { work = function(ms) spin(ms) end }")
  write("b.lua", spin .. "return function(ms) spin(ms) end")
  return root
end

local function host_spin(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
end

local function cpu(d, g) return d.groups[g.id].cpu_us end

describe("perfmon.attach_source", function()
  local root, saved_path

  before_each(function()
    root = plugin_tree()
    saved_path = package.path
    package.path = root .. "/plugins/?.lua;" .. root .. "/plugins/?/init.lua;" .. package.path
  end)

  after_each(function()
    package.path = saved_path
    package.loaded["a"], package.loaded["a.util"], package.loaded["b"] = nil, nil, nil
    os.execute(("rm -rf '%s'"):format(root))
  end)

  it("groups a plugin's files by folder, loaded before and after, and the modules it requires", function()
    local a = require("a") -- loaded and run before any group or monitor
    a(2)
    local A = perfmon.group{ name = "a", kind = "plugin" }
    local B = perfmon.group{ name = "b", kind = "plugin" }
    local m <close> = perfmon.monitor{ "jank", "ticks" }
    a(2) -- cached before the attach: resolved again after it
    perfmon.attach_source(root .. "/plugins/a/", A)
    perfmon.attach_source(root .. "/plugins/b.lua", B)
    local b = require("b") -- loaded after the attach
    local s0 = m:snapshot()
    local ta, tb = os.clock(), nil
    perfmon.event(function()
      a(20)
      ta = (os.clock() - ta) * 1e6
      tb = os.clock()
      b(10)
      tb = (os.clock() - tb) * 1e6
      host_spin(15)
    end)
    local d = m:snapshot():subtract(s0)
    truth.assert_near(cpu(d, A), ta, "a (its init and its util)")
    truth.assert_near(cpu(d, B), tb, "b")
    assert.equals(1, d.groups[A.id].ticks)
    assert.equals(1, d.groups[B.id].ticks)
  end)

  it("nests prefixes: a set holds every group whose prefix matches", function()
    local ALL = perfmon.group{ name = "plugins", kind = "folder" }
    local A = perfmon.group{ name = "a", kind = "plugin" }
    perfmon.attach_source(root .. "/plugins/", ALL)
    perfmon.attach_source(root .. "/plugins/a/", A)
    local a, b = require("a"), require("b")
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    a(20)
    local ta = (os.clock() - t0) * 1e6
    b(10)
    local tall = (os.clock() - t0) * 1e6
    host_spin(10)
    local d = m:snapshot():subtract(s0)
    truth.assert_near(cpu(d, A), ta, "a")
    truth.assert_near(cpu(d, ALL), tall, "plugins/ (a and b)")
    perfmon.detach_source(root .. "/plugins/", ALL)
    perfmon.detach_source(root .. "/plugins/a/", A)
  end)

  it("stops charging a prefix once detached, and lets several prefixes name one group", function()
    local G = perfmon.group{ name = "a and b", kind = "plugin" }
    perfmon.attach_source(root .. "/plugins/a/", G)
    perfmon.attach_source(root .. "/plugins/b.lua", G)
    local a, b = require("a"), require("b")
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    a(10)
    b(10)
    local both = (os.clock() - t0) * 1e6
    local s1 = m:snapshot()
    truth.assert_near(cpu(s1:subtract(s0), G), both, "a and b")
    assert.is_true(perfmon.detach_source(root .. "/plugins/a/", G))
    assert.is_false(perfmon.detach_source(root .. "/plugins/a/", G))
    a(10)
    local t1 = os.clock()
    b(10)
    local only_b = (os.clock() - t1) * 1e6
    truth.assert_near(cpu(m:snapshot():subtract(s1), G), only_b, "b alone after a's detach")
    perfmon.detach_source(root .. "/plugins/b.lua", G)
  end)

  it("matches a string chunk by its chunk name without the leading =", function()
    local G = perfmon.group{ name = "inline", kind = "plugin" }
    perfmon.attach_source("inline/", G)
    local f = assert(load("local t = os.clock() + 0.01 while os.clock() < t do end", "=inline/x"))
    local other = assert(load("local t = os.clock() + 0.01 while os.clock() < t do end", "=elsewhere"))
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    f()
    local tf = (os.clock() - t0) * 1e6
    other()
    truth.assert_near(cpu(m:snapshot():subtract(s0), G), tf, "inline/x only")
    perfmon.detach_source("inline/", G)
  end)

  it("rejects bad arguments, naming them", function()
    local G = perfmon.group{ name = "g", kind = "plugin" }
    local cases = {
      { { "", G }, "bad argument #1 to 'perfmon.attach_source' (the prefix is empty)" },
      { { "a\0b", G }, "bad argument #1 to 'perfmon.attach_source' (the prefix holds a NUL byte)" },
      { { nil, G }, "bad argument #1 to 'perfmon.attach_source' (string expected, got nil)" },
      { { {}, G }, "bad argument #1 to 'perfmon.attach_source' (string expected, got table)" },
      { { "x", {} }, "bad argument #2 to 'perfmon.attach_source' (perfmon.group expected, got table)" },
      { { "x" }, "bad argument #2 to 'perfmon.attach_source' (perfmon.group expected, got nil)" },
    }
    -- (Lua names the function by the first table of package.loaded it
    -- finds it in: perfmon, perfmon.core or perfmon.loader)
    local function same(want, got)
      assert.equals(want, (got:gsub("'perfmon%.%a+%.", "'perfmon.")))
    end
    for _, c in ipairs(cases) do
      local ok, err = pcall(perfmon.attach_source, table.unpack(c[1], 1, 2))
      assert.is_false(ok)
      same(c[2], err)
    end
    local ok, err = pcall(perfmon.detach_source, "", G)
    assert.is_false(ok)
    same("bad argument #1 to 'perfmon.detach_source' (the prefix is empty)", err)
  end)
end)

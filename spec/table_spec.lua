-- table_spec.lua: perfmon.table, the about:performance text tables: rounded
-- right-aligned figures, cut text, rows folded under their parent.

local text_table = require("perfmon.table")

describe("perfmon.table", function()
  local columns = {
    { key = "name", title = "module" },
    { key = "self_ms", title = "self ms", figure = true },
    { key = "share", title = "share", format = function(v) return ("%.1f%%"):format(v) end },
    { key = "where", title = "hottest", max = 12 },
  }
  local rows = {
    { name = "slow", self_ms = 62839.5, share = 88.61, where = "burn at mod_slow.lua:33",
      children = { { name = "@localhost", self_ms = 62.8395, share = 1.5 },
        { name = "@other", self_ms = 0.0, share = 0 } } },
    { name = "c2s", self_ms = 4.21, share = 0.02 },
  }

  it("rounds figures, aligns them right and folds the children", function()
    local lines = text_table.render(columns, rows)
    assert.same({
      "module    self ms  share  hottest",
      "slow (2)    62840  88.6%  burn at m...",
      "c2s          4.21   0.0%",
    }, lines)
  end)

  it("lists the children indented when asked", function()
    local lines = text_table.render(columns, rows, { unfold = true })
    assert.equals("slow            62840  88.6%  burn at m...", lines[2])
    assert.equals("  @localhost     62.8   1.5%", lines[3])
    assert.equals("  @other            0   0.0%", lines[4])
    assert.equals(5, #lines)
  end)

  it("rounds to about three figures", function()
    assert.equals("62.8", text_table.figure(62.8395))
    assert.equals("2658", text_table.figure(2657.7))
    assert.equals("0.42", text_table.figure(0.4213))
    assert.equals("7", text_table.figure(7))
    assert.equals("0", text_table.figure(0.0))
  end)

  it("gives both integrations' performance table its columns", function()
    local function titles(cols)
      local t = {}
      for i, c in ipairs(cols) do t[i] = c.title end
      return t
    end
    assert.same({ "module", "self ms", "cpu ms", "share", "ticks", "longest",
      "self jank histogram (ms:events)", "hottest (the profiler's samples)" },
      titles(text_table.performance_columns("module", "ticks", true)))
    local perf = text_table.performance_columns("plugin", "samples")
    assert.same({ "plugin", "self ms", "cpu ms", "share", "samples", "longest",
      "self jank histogram (ms:events)" }, titles(perf))
    assert.same({
      "plugin  self ms  cpu ms   share  samples  longest  self jank histogram (ms:events)",
      "lsp        62.8    2658  100.0%       12  32-64    32-64:1",
    }, text_table.render(perf, { { name = "lsp", self_ms = 62.8395, cpu_ms = 2657.7, share = 100,
      count = 12, longest = "32-64", histogram = "32-64:1" } }))
    -- no cell cut: the histogram's longest events, hottest's line
    local histogram = "1-2:9 2-4:82 4-8:636 8-16:160 16-32:29 32-64:3 64-128:2 128-256:1 256-512:1 >=512:1"
    local hottest = "prosody's core_process_stanza, from /usr/lib/prosody/modules/mod_c2s.lua:284 (31%)"
    local lines = text_table.render(text_table.performance_columns("module", "ticks", true),
      { { name = "c2s", self_ms = 1, cpu_ms = 2, share = 3, count = 4, longest = ">= 512 ms",
        histogram = histogram, hottest = hottest } })
    assert.is_truthy(lines[2]:find(histogram .. "  " .. hottest, 1, true), lines[2])
    assert.has_error(function() text_table.performance_columns(nil, "ticks") end,
      "bad argument #1 to 'perfmon.table.performance_columns' (string expected, got nil)")
    assert.has_error(function() text_table.performance_columns("plugin", "calls") end,
      "bad argument #2 to 'perfmon.table.performance_columns' (\"ticks\" or \"samples\" expected, got \"calls\")")
  end)

  it("rejects bad arguments, naming them", function()
    assert.has_error(function() text_table.render({}, {}) end,
      "bad argument #1 to 'perfmon.table.render' (list of columns expected, got an empty table)")
    assert.has_error(function() text_table.render({ { title = "x" } }, {}) end,
      "bad argument #1 to 'perfmon.table.render' (column 1: a table with a string key expected)")
    assert.has_error(function() text_table.render(columns, nil) end,
      "bad argument #2 to 'perfmon.table.render' (list of rows expected, got nil)")
    assert.has_error(function() text_table.render({ { key = "x", max = 2 } }, {}) end,
      "bad argument #1 to 'perfmon.table.render' (column 1: max must be an integer >= 4)")
    -- a misspelt field or option is an error, never ignored
    assert.has_error(function() text_table.render({ { key = "x", algn = "left" } }, {}) end,
      "bad argument #1 to 'perfmon.table.render' (column 1: unknown field \"algn\" "
      .. "(fields: key, title, figure, format, align, max))")
    assert.has_error(function() text_table.render({ { key = "x", align = "centre" } }, {}) end,
      "bad argument #1 to 'perfmon.table.render' (column 1: align must be \"left\" or \"right\", got \"centre\")")
    assert.has_error(function() text_table.render({ { key = "x", title = 5 } }, {}) end,
      "bad argument #1 to 'perfmon.table.render' (column 1: title must be a string, got number)")
    assert.has_error(function() text_table.render(columns, {}, { unfld = true }) end,
      "bad argument #3 to 'perfmon.table.render' (unknown option \"unfld\" (options: unfold))")
    assert.has_error(function() text_table.figure("3") end,
      "bad argument #1 to 'perfmon.table.figure' (number expected, got string)")
    assert.has_error(function() text_table.figure(0 / 0) end,
      "bad argument #1 to 'perfmon.table.figure' (number expected, got nan)")
  end)
end)

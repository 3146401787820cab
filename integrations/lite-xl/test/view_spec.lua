-- The performance view's editor-free parts: its figures' texts and the
-- columns that fit a width (perfmon/columns.lua), its lines, folding and
-- selection (perfmon/listing.lua), a row's histogram bins and the whole
-- editor's row (perfmon/model.lua).  Widths are measured by a fake font
-- given here: a monospace one (each character 7 units) and a proportional
-- one, whose widths are added up by hand for the ground truth.  ctest
-- lite-xl.model runs it from the repository root.

local perfmon = require("perfmon")
local columns = dofile("integrations/lite-xl/perfmon/columns.lua")
local listing = dofile("integrations/lite-xl/perfmon/listing.lua")
local model = dofile("integrations/lite-xl/perfmon/model.lua")

local CHAR = 7
local function mono(text) return CHAR * utf8.len(text) end

-- i, l, . and space 3 units, m and w 11, digits 6, the rest 7
local function proportional(text)
  local w = 0
  for _, c in utf8.codes(text) do
    local ch = utf8.char(c)
    w = w + (ch:match("[il%. ]") and 3 or ch:match("[mw]") and 11 or ch:match("%d") and 6 or 7)
  end
  return w
end

local function row(name, self_ms, fields)
  local r = {
    name = name, self_us = self_ms * 1000, cpu_us = self_ms * 2000, share = self_ms / 10,
    ticks = 100, samples = 10, longest = "2-4 ms", histogram = "2-4:1", durations = { 1, 1 },
  }
  for k, v in pairs(fields or {}) do r[k] = v end
  return r
end

describe("lite-xl view: figures", function()
  it("rounds a time to three significant figures, in ms or s", function()
    local cases = {
      { 0, "0.0 ms" }, { 49, "0.0 ms" }, { 50, "0.1 ms" }, { 44249, "44.2 ms" },
      { 99949, "99.9 ms" }, { 99950, "100 ms" }, { 481100, "481 ms" }, { 999499, "999 ms" },
      { 999500, "1.00 s" }, { 1901700, "1.90 s" }, { 25300000, "25.3 s" }, { 99950000, "100 s" },
      { 312000000, "312 s" },
    }
    for _, c in ipairs(cases) do assert.equals(c[2], columns.time(c[1]), tostring(c[1])) end
  end)

  it("counts to 99999, then in thousands and millions; '-' for none", function()
    local cases = { { 0, "0" }, { 99999, "99999" }, { 100000, "100k" }, { 999499, "999k" },
      { 999500, "1.0M" }, { 4600000, "4.6M" }, { nil, "-" } }
    for _, c in ipairs(cases) do assert.equals(c[2], columns.count(c[1]), tostring(c[1])) end
  end)

  it("cuts the paths of where's words to their file names", function()
    assert.equals("core's fuzzy_match, from apijanky.lua:35 (64%)",
      columns.short_where("core's fuzzy_match, from /home/u/.config/lite-xl/plugins/apijanky.lua:35 (64%)"))
    assert.equals("burn at janky.lua:16 (100%)", columns.short_where([[burn at C:\lite\plugins\janky.lua:16 (100%)]]))
  end)

  it("names a bad argument", function()
    assert.has_error(function() columns.time("1") end, "bad argument #1 to 'time' (number of µs expected, got string)")
    assert.has_error(function() columns.count({}) end, "bad argument #1 to 'count' (number expected, got table)")
  end)
end)

describe("lite-xl view: truncation", function()
  it("keeps a text that fits, and cuts one that does not to the longest prefix with …", function()
    assert.equals("treeview", columns.truncate("treeview", 8 * CHAR, mono))
    -- 7 characters of room: 6 of the name and the ellipsis
    assert.equals("treevi…", columns.truncate("treeview", 7 * CHAR, mono))
    assert.equals("treevi…", columns.truncate("treeview", 8 * CHAR - 1, mono))
    assert.equals("…", columns.truncate("treeview", CHAR, mono))
    assert.equals("", columns.truncate("treeview", CHAR - 1, mono))
  end)

  it("measures with the font: a narrow prefix takes more characters", function()
    -- "lll" is 9 units, "…" 7: 16 fit where "mmm…" (40) does not
    assert.equals("lll…", columns.truncate("lllllllll", 16, proportional))
    assert.equals("m…", columns.truncate("mmmmmmm", 18, proportional))
    for _, w in ipairs { 10, 20, 33, 50 } do
      local t = columns.truncate("minimap_plus_extras", w, proportional)
      assert.is_true(proportional(t) <= w, t)
    end
  end)

  it("cuts between whole UTF-8 characters", function()
    -- "é" is one character: never cut in its middle
    local t = columns.truncate("ééééé", 3 * CHAR, mono)
    assert.equals("éé…", t)
    assert.is_truthy(utf8.len(t))
  end)
end)

describe("lite-xl view: columns that fit a width", function()
  local rows = {
    row("core", 1237), row("janky", 481, { hottest = "burn at /tmp/u/plugins/janky.lua:16 (100%)" }),
    row("a_plugin_with_a_long_name", 3),
  }
  rows[1].hottest, rows[3].hottest = "-", "too few samples (3)"
  local GAP = 2

  -- the widths by hand, in characters: "88.8 ms" 7, "100.0%" 6 (+ a bar of
  -- 5 and a gap), "512-1024 ms" 11, "88888" 5; names: 25; hottest's
  -- words, their paths cut: "burn at janky.lua:16 (100%)" 27
  local W = { name = 25, self = 7, share = 6 + 5 + GAP, cpu = 7, longest = 11, count = 7, hottest = 27 }

  local function fit(width_chars, opts)
    opts = opts or {}
    return columns.fit(width_chars * CHAR, mono, {
      rows = opts.rows or rows, gap = GAP * CHAR, bar = 5 * CHAR, count = opts.count,
    })
  end
  local function keys(cols)
    local k = {}
    for _, c in ipairs(cols) do k[#k + 1] = c.key end
    return table.concat(k, " ")
  end

  it("shows every column, each as wide as its widest text, when there is room", function()
    local cols = fit(200)
    assert.equals("name self share cpu longest count hottest", keys(cols))
    local x = 0
    for _, c in ipairs(cols) do
      assert.equals(x, c.x / CHAR, c.key)
      assert.equals(W[c.key] == 7 and c.key == "count" and 5 or W[c.key], c.w / CHAR, c.key)
      x = x + c.w / CHAR + GAP
    end
    -- share's text beside its bar
    assert.equals(6, cols[3].text_w / CHAR)
    assert.equals(5 * CHAR, cols[3].bar)
  end)

  it("drops hottest, the count, longest, cpu, share in turn as the width shrinks", function()
    -- least widths: name 7 ("plugin…"), hottest 13 ("hottest place")
    local least = { name = 7, self = 7, share = 13, cpu = 7, longest = 11, count = 5, hottest = 13 }
    local order = { "name", "self", "share", "cpu", "longest", "count", "hottest" }
    for n = #order, 3, -1 do
      local total = GAP * (n - 1)
      for i = 1, n do total = total + least[order[i]] end
      assert.equals(table.concat(order, " ", 1, n), keys(fit(total)), "width " .. total)
      assert.equals(table.concat(order, " ", 1, n - 1), keys(fit(total - 1)), "width " .. total - 1)
    end
  end)

  it("gives the room left to the names first, then to hottest, and cuts them", function()
    -- every column at its least (7 + 7 + 13 + 7 + 11 + 5 + 13 + 6 gaps of 2 = 75) and 30 more:
    -- the name takes 18 (to its 25), hottest the 12 left (13 + 12 = 25)
    local cols = fit(75 + 30)
    assert.equals(25 * CHAR, cols[1].w)
    assert.equals(25 * CHAR, cols[7].w)
    local cells = columns.cells(cols, rows[2], mono)
    assert.equals("burn at janky.lua:16 (10…", cells[7]) -- 24 characters and …
    assert.equals(25, utf8.len(cells[7]))
    -- a width for 10 of the names' characters: cut with …
    cols = fit(75 + 3)
    assert.equals(10 * CHAR, cols[1].w)
    assert.equals("a_plugin_…", columns.cells(cols, rows[3], mono)[1])
  end)

  it("keeps the figures' columns as wide whatever the figures", function()
    local small = { row("x", 0.001, { hottest = "-" }) }
    local big = { row("x", 9876543, { hottest = "-" }) }
    assert.are.same(fit(200, { rows = small })[2], fit(200, { rows = big })[2])
  end)

  it("right-aligns the figures, rounded; a column of samples for a sampled monitor", function()
    local cols = fit(200, { count = "samples" })
    assert.equals("samples", cols[6].title)
    local cells = columns.cells(cols, rows[2], mono, "samples")
    assert.are.same({ "janky", "481 ms", "48.1%", "962 ms", "2-4 ms", "10", "burn at janky.lua:16 (100%)" }, cells)
    for i = 2, 6 do assert.equals("right", cols[i].align) end
    assert.equals("left", cols[1].align)
  end)

  it("fits a proportional font: the texts' widths in its units", function()
    local cols = columns.fit(1000, proportional, { rows = rows, gap = 10 })
    -- "a_plugin_with_a_long_name": 4 i/l of 3, a w and an m of 11, 19 others of 7
    assert.equals(12 + 22 + 133, cols[1].w)
    -- self: the widest of "88.8 ms" (6+6+3+6+3+11+7 = 42), "888 ms" (18+3+18 = 39), "8.88 s" (6+3+12+3+7 = 31)
    assert.equals(42, cols[2].w)
    assert.equals(167 + 10, cols[2].x)
  end)

  it("gives the names what self leaves when even they do not fit", function()
    local cols = fit(10)
    assert.equals("name self", keys(cols))
    assert.equals(1 * CHAR, cols[1].w) -- 10 - 7 of self - 2 of gap
    assert.equals("…", columns.cells(cols, rows[1], mono)[1])
    assert.equals(0, fit(3)[1].w)
  end)

  it("names a bad argument", function()
    assert.has_error(function() columns.fit("1", mono, { rows = {} }) end,
      "bad argument #1 to 'fit' (width expected, got string)")
    assert.has_error(function() columns.fit(1, nil, { rows = {} }) end,
      "bad argument #2 to 'fit' (measure function expected, got nil)")
    assert.has_error(function() columns.fit(1, mono, {}) end,
      "bad argument #3 to 'fit' (options with rows expected, got table)")
    assert.has_error(function() columns.fit(1, mono, { rows = {}, count = "calls" }) end,
      "bad argument #3 to 'fit' (count: \"ticks\" or \"samples\" expected, got calls)")
    assert.has_error(function() columns.cell("calls", rows[1]) end,
      "bad argument #1 to 'cell' (a column's key expected, got calls)")
  end)
end)

describe("lite-xl view: lines, folding, selection", function()
  -- by self time, as model.rows gives them; three idle (under 50 µs)
  local function rows()
    return {
      row("core", 1200), row("janky", 480), row("treeview", 24), row("autoreload", 0.06),
      row("detectindent", 0.049), row("language_c", 0), row("macro", 0),
    }
  end
  local total = row("(whole editor)", 2000)

  local function keys(l)
    local k = {}
    for _, line in ipairs(l.lines) do k[#k + 1] = line.key end
    return table.concat(k, " ")
  end

  it("folds the plugins under 50 µs of self time into one line, after the busy ones", function()
    local l = listing.new()
    l:set(rows(), total)
    assert.equals("core janky treeview autoreload (idle) (whole editor)", keys(l))
    local fold = l.lines[5]
    assert.same({ "fold", 3, false }, { fold.kind, fold.count, fold.expanded })
    assert.equals("total", l.lines[6].kind)
    assert.equals(1, l.selected)
  end)

  it("unfolds them on enter on the fold's line, and folds them again", function()
    local l = listing.new()
    l:set(rows(), total)
    assert.is_false(l:toggle()) -- on core: nothing to unfold
    l:select(5)
    assert.is_true(l:toggle())
    assert.equals("core janky treeview autoreload (idle) detectindent language_c macro (whole editor)", keys(l))
    assert.is_true(l.lines[6].idle)
    assert.equals("(idle)", l:current().key)
    -- folding from an idle plugin's line selects the fold's
    l:select(7)
    l:set_expanded(false)
    assert.equals("core janky treeview autoreload (idle) (whole editor)", keys(l))
    assert.equals(5, l.selected)
    -- and stays unfolded across a refresh
    l:set_expanded(true)
    l:set(rows(), total)
    assert.equals(9, #l.lines)
  end)

  it("keeps the selection on its plugin as the figures reorder the rows", function()
    local l = listing.new()
    l:set(rows(), total)
    l:select(3) -- treeview
    local r = rows()
    r[3], r[1] = r[1], r[3] -- treeview now the busiest
    l:set(r, total)
    assert.equals(1, l.selected)
    assert.equals("treeview", l:current().key)
    -- a plugin gone idle, folded: the fold's line
    r = rows()
    r[3].self_us = 10
    l:set(r, total)
    assert.equals("(idle)", l:current().key)
    -- a selected line that is gone: the selection stays within the lines
    l:select(#l.lines)
    l:set({ row("core", 1) }, nil)
    assert.equals(1, l.selected)
  end)

  it("moves by one, by a page, to the first and the last, stopping at the ends", function()
    local l = listing.new()
    local r = {}
    for i = 1, 30 do r[i] = row(("p%02d"):format(i), 100 - i) end
    l:set(r, total) -- 31 lines
    l:move(-1)
    assert.equals(1, l.selected)
    l:move(1)
    assert.equals(2, l.selected)
    l:page(1, 10) -- the last line of the page is the first of the next
    assert.equals(11, l.selected)
    l:page(1, 10)
    l:page(1, 10)
    assert.equals(29, l.selected)
    l:page(1, 10)
    assert.equals(31, l.selected)
    l:page(-1, 10)
    assert.equals(22, l.selected)
    l:page(1, 1) -- a page of one line still moves
    assert.equals(23, l.selected)
    l:first()
    assert.equals(1, l.selected)
    l:last()
    assert.equals(31, l.selected)
    assert.equals("(whole editor)", l:current().key)
  end)

  it("names a bad argument", function()
    local l = listing.new()
    assert.has_error(function() l:set(nil) end, "bad argument #1 to 'set' (model.rows' rows expected, got nil)")
    assert.has_error(function() l:set({}, 1) end, "bad argument #2 to 'set' (model.total's row expected, got number)")
    assert.has_error(function() l:select(1.5) end, "bad argument #1 to 'select' (line number expected, got float)")
  end)
end)

describe("lite-xl view: a row's histogram, the whole editor's row", function()
  it("splits a durations histogram into its bins, each on its own", function()
    -- 9 events of 1 ms or more: 4 in 1-2, 3 in 2-4, none in 4-8, 2 in 8-16
    local bins = model.bins { 9, 5, 2, 2, 0 }
    assert.same({ lo = 1, hi = 2, count = 4 }, bins[1])
    assert.same({ lo = 2, hi = 4, count = 3 }, bins[2])
    assert.same({ lo = 4, hi = 8, count = 0 }, bins[3])
    assert.same({ lo = 8, hi = 16, count = 2 }, bins[4])
    assert.same({ lo = 16, hi = 32, count = 0 }, bins[5])
    assert.equals(5, #bins)
    assert.has_error(function() model.bins("x") end,
      "bad argument #1 to 'bins' (durations histogram expected, got string)")
  end)

  it("gives the whole editor's figures as a row, and its events' bins", function()
    local m <close> = perfmon.monitor { "jank", "ticks" }
    local s0 = m:snapshot()
    local t = os.clock() + 0.003
    perfmon.event(function() while os.clock() < t do end end)
    local d = m:snapshot():subtract(s0)
    local total = model.total(d)
    assert.equals("(whole editor)", total.name)
    assert.same({ d.process.self_us, d.process.cpu_us, 100, d.process.ticks },
      { total.self_us, total.cpu_us, total.share, total.ticks })
    -- the 3 ms event: in 2-4 ms, or over on a busy machine; one event in all
    local n = 0
    for _, b in ipairs(model.bins(total.durations)) do n = n + b.count end
    assert.equals(1, n)
    assert.is_true(total.durations[2] == 1, "no event of 2 ms or more")
    assert.has_error(function() model.total(nil) end,
      "bad argument #1 to 'total' (perfmon snapshot expected, got nil)")
  end)
end)

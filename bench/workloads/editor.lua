--- bench/workloads/editor.lua: an editor-like plugin host: eight sandboxed
-- plugins and a shared library, every keystroke one event through all of
-- them (see bench/run.lua for what a workload is).

local plugin = require("plugin")

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

return {
  name = "editor",
  what = "8 sandboxed plugins + a shared library group, 18000 keystrokes, one event each",
  units = 18000,
  setup = function(keys)
    local groups = {}
    -- The shared helpers: their own chunk, sandbox and group, called by
    -- several plugins (a call into them enters the "lib" group).
    local _, lib_group, lib = plugin.load("lib", LIB_SRC, nil, "library")
    groups[1] = lib_group
    local plugins = {}
    for _, p in ipairs(EDITOR_PLUGINS) do
      local env, group = plugin.load(p.name, p.src, { lib = lib })
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
      plugins = plugins, -- their environments (plugins[i] is groups[i + 1]'s): bench/sampled.lua
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

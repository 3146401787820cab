-- The scripted session both editor hosts replay (examples/editor/editor.lua
-- and examples/editor_host.c): a user writes three lines of Lua, moving the
-- cursor around and saving now and then.
--
-- Steps, replayed in order, each input one iteration of the event loop:
--   { "type", "text" }      one keystroke per character
--   { "key", k }            one keystroke: a character, "\n" (Enter) or
--                           "\b" (Backspace)
--   { "move", line, col }   the cursor moves to line, col (arrow keys, a
--                           click); col is a byte column, 1 is the start
--   { "save" }              Ctrl+S: the host writes the document, then tells
--                           the plugins
-- 27 keystrokes, 22 cursor moves and 4 saves: 53 inputs.
return {
  { "type", "local t = {}" },
  { "key", "\n" },
  { "save" },
  { "move", 1, 1 }, { "move", 1, 7 }, { "move", 1, 11 }, { "move", 1, 12 },
  { "move", 1, 13 },
  { "move", 2, 1 },
  { "type", "f(t[1])" },
  { "save" },
  { "move", 2, 1 }, { "move", 2, 2 }, { "move", 2, 3 }, { "move", 2, 4 },
  { "move", 2, 5 }, { "move", 2, 6 }, { "move", 2, 7 }, { "move", 2, 8 },
  { "key", "\b" },
  { "key", ")" },
  { "save" },
  { "move", 1, 13 }, { "move", 1, 12 }, { "move", 1, 11 }, { "move", 1, 10 },
  { "move", 1, 1 },
  { "move", 2, 8 },
  { "type", " -- x" },
  { "move", 1, 11 }, { "move", 2, 2 },
  { "save" },
}

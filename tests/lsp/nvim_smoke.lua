-- Headless Neovim smoke test: start mpl-lsp as a real client does, open a file with
-- errors, and collect diagnostics, hover and completion into a JSON file.
-- Usage: nvim --headless --clean -u NONE -i NONE -c "luafile nvim_smoke.lua"
-- Environment: MPL_FILE (the .moe file), MPL_OUT (JSON output), MPL_PY (python), MPL_ROOT.
local file = os.getenv("MPL_FILE")
local out = os.getenv("MPL_OUT")
local python = os.getenv("MPL_PY")
local root = os.getenv("MPL_ROOT")
local result = { errors = {} }

local function finish()
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd("qa!")
end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.bo[bufnr].filetype = "moe"
  local config = {
    name = "mpl-lsp",
    cmd = { python, "-m", "lsp.server", "--stdio" },
    root_dir = root,
    init_options = { debounceMs = 0 },
  }
  local client_id
  if vim.lsp.start then            -- Neovim >= 0.8
    client_id = vim.lsp.start(config)
  else                              -- Neovim 0.7
    client_id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
  result.client_id = client_id
  local client = vim.lsp.get_client_by_id(client_id)
  vim.wait(20000, function() return client.initialized or (client.is_stopped and client.is_stopped()) end, 50)
  vim.wait(20000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
  result.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(result.diagnostics, { lnum = d.lnum, col = d.col, message = d.message,
      severity = d.severity, code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code),
      source = d.source })
  end
  local uri = vim.uri_from_bufnr(bufnr)
  -- hover on "eviction" (line 4, 0-based 3)
  local hover = client.request_sync("textDocument/hover",
    { textDocument = { uri = uri }, position = { line = 3, character = 6 } }, 10000, bufnr)
  result.hover = hover and hover.result and hover.result.contents and hover.result.contents.value or vim.NIL
  -- completion after "eviction = " on line 4
  local line = vim.api.nvim_buf_get_lines(bufnr, 3, 4, false)[1]
  local col = #line
  local comp = client.request_sync("textDocument/completion",
    { textDocument = { uri = uri }, position = { line = 3, character = col } }, 10000, bufnr)
  result.completion = {}
  if comp and comp.result then
    local items = comp.result.items or comp.result
    for _, it in ipairs(items) do table.insert(result.completion, it.label) end
  end
  -- Neovim 0.9+ requests semantic tokens by itself: the colours of a file with no grammar
  local v = vim.version()
  result.version = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  result.semantic = vim.NIL
  if vim.lsp.semantic_tokens and vim.lsp.semantic_tokens.get_at_pos then
    local toks = {}
    vim.wait(20000, function()
      toks = vim.lsp.semantic_tokens.get_at_pos(bufnr, 3, 5) or {}   -- "eviction"
      return #toks > 0
    end, 50)
    result.semantic = {}
    for _, t in ipairs(toks) do
      local hl = vim.api.nvim_get_hl(0, { name = "@lsp.type." .. t.type, link = true })
      table.insert(result.semantic, { type = t.type, link = hl and hl.link or vim.NIL })
    end
  end
  client.stop()
end)
if not ok then table.insert(result.errors, tostring(err)) end
finish()

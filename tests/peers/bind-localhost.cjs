// Preload: node -r bind-localhost.cjs ... (or NODE_OPTIONS="--require /abs/path/bind-localhost.cjs")
// Forces net/http servers that call listen(port[,cb]) / listen({port}) without a host onto 127.0.0.1.
// If BIND_PORT is set, the first TCP listen() also gets that port (for examples with a hard-coded port).
// Copied from /work/shared/TEST-EQUIPMENT.md §7.
const net = require('net');
const orig = net.Server.prototype.listen;
let portOverridden = false;
net.Server.prototype.listen = function (...args) {
  const forced = process.env.BIND_PORT && !portOverridden ? Number(process.env.BIND_PORT) : undefined;
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    if (forced !== undefined) { args[0] = forced; portOverridden = true; }
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (args[0] && typeof args[0] === 'object' && !('path' in args[0])) {
    args[0] = { ...args[0], host: args[0].host || '127.0.0.1' };
    if (forced !== undefined) { args[0].port = forced; portOverridden = true; }
  } else if (args.length === 0 || typeof args[0] === 'function') {
    args.unshift(forced ?? 0, '127.0.0.1'); if (forced !== undefined) portOverridden = true;
  }
  return orig.apply(this, args);
};

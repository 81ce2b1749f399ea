// An ordinary Node.js HTTP server (keep-alive, JSON body): what a user runs first. Its
// first requests are dear (the JIT compiles, the heap grows, the GC runs): work, not a spin.
// Usage: node node_http.js PORT
const http = require('http');
const port = Number(process.argv[2]);
let n = 0;
http.createServer((req, res) => {
  n += 1;
  const body = JSON.stringify({ ok: true, n, path: req.url, items: [1, 2, 3].map((x) => x * n) });
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}).listen(port, '127.0.0.1', () => console.log(`listening on 127.0.0.1:${port}`));

// Electron main process: app://… is answered from an encrypted bundle by
// encfs-serve over a unix socket (no TCP port, no token needed there:
// encfs-serve --listen unix:$SOCK --no-token --allow-uid $(id -u)).
//
//   encfs-serve app.bundle --key-credential app.key \
//     --listen unix:/run/user/1000/app/serve.sock --no-token --allow-uid 1000
const { app, protocol, BrowserWindow } = require('electron');
const http = require('node:http');

const SOCKET = process.env.APP_SERVE_SOCKET || `/run/user/${process.getuid()}/app/serve.sock`;

protocol.registerSchemesAsPrivileged([
  { scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true } },
]);

// One GET over the unix socket; the Range header is passed on so media
// elements can seek.
function forward(request) {
  const url = new URL(request.url);
  return new Promise((resolve, reject) => {
    const headers = { Host: 'localhost' };
    const range = request.headers.get('range');
    if (range) headers.Range = range;
    const req = http.request({ socketPath: SOCKET, path: url.pathname, method: request.method, headers }, (res) => {
      const body = request.method === 'HEAD' ? null : new ReadableStream({
        start(controller) {
          res.on('data', (chunk) => controller.enqueue(chunk));
          res.on('end', () => controller.close());
          res.on('error', (error) => controller.error(error)); // a damaged chunk: the body ends in error
        },
      });
      resolve(new Response(body, { status: res.statusCode, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

app.whenReady().then(() => {
  protocol.handle('app', forward);
  new BrowserWindow().loadURL('app://bundle/index.html');
});

import CryptCore
import EncFSCLI
import EncFSCore
import EncFSService
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-serve BUNDLE|URL`: serves a bundle's files over loopback HTTP
/// or a unix socket, in the foreground, without FUSE.
package enum ServeCommand {
    static let tool = "encfs-serve"

    static let help = """
    usage: encfs-serve BUNDLE|URL [--listen ADDR]... [--url-file FILE] [options]

    Serves the files of an encrypted bundle over HTTP on this machine,
    decrypting each request in memory: no mount, no FUSE, no privileges.
    Once it serves, it prints its base URL (with the token) on stdout, one
    line per listener, and sends READY=1 to NOTIFY_SOCKET; SIGTERM or
    SIGINT lets requests in flight finish (5 s at most) and exits 0.

    listening:
      --listen ADDR            127.0.0.1:PORT, [::1]:PORT, localhost:PORT or
                               unix:PATH; repeatable; default 127.0.0.1:0 (a
                               free port). Sockets passed by systemd
                               (LISTEN_FDS) are used instead when present
      --listen-any             allow an address that is not loopback (then a
                               token is mandatory and any Host is accepted)
      --socket-mode MODE       a unix socket's mode, octal (default 600); a
                               stale socket is replaced, the socket removed
                               at exit
      --url-file FILE          also write the URL there (mode 0600, atomically)
      --json                   print one JSON object instead: url, listen,
                               token_required

    who may ask:
      every request carries a random 128-bit token as its first path segment
      (http://127.0.0.1:PORT/TOKEN/index.html; relative links keep it) or as
      `Authorization: Bearer TOKEN`; without it: 404. The Host header must
      name the listen address or localhost (421 otherwise).
      --token-file FILE        use the token in FILE (at least 22 characters
                               of A-Z a-z 0-9 - . _ ~) instead of a random one
      --no-token               no token (only when every listener is a unix
                               socket)
      --allow-uid, --allow-gid, --allow-exe, --allow-cgroup
                               unix sockets only: the peer (SO_PEERCRED) must
                               pass these rules, as for encfs-mount; refused
                               when any listener is TCP, whose peer cannot be
                               identified

    what it serves:
      --index NAME             a directory's page (default index.html)
      --no-index               directories serve no page
      --list-directories       a directory without a page lists its entries
      --cache-control VALUE    the Cache-Control header (default no-store:
                               any caching lets a browser write the
                               plaintext to its disk cache)

    locking (as encfs-mount; controlled with encfs-ctl --name NAME):
      --name NAME              create a control socket named NAME (1 to 64 of
                               A-Z a-z 0-9 . _ -) in /run/encfs for root,
                               $XDG_RUNTIME_DIR/encfs otherwise: encfs-ctl
                               --name NAME status|lock|unlock
      --protection CLASS       when keys go away (encfs-ctl --name NAME lock):
                               complete: at lock, bodies being sent are cut;
                               unless-open: at lock, bodies being sent
                               finish first; until-unmount (default): only
                               at exit, and encfs-ctl lock needs --force
      --idle-lock DURATION     lock after DURATION without a request: 90s,
                               15m, 1h (implies --protection complete)
      --start-locked           start without a key (no key options); serve
                               nothing until encfs-ctl --name NAME unlock
      while locked, a request with a valid token gets 503 with no body; the
      lock options need --name

    limits:
      --max-connections N      connections at once per listener (default 256)
      --timeout SECONDS        idle time before a connection is closed
                               (default 30)
      --header-timeout SECONDS a connection must send a whole request header
                               within this time of opening or of its last
                               response, however slowly bytes trickle in
                               (default 10; slowloris clients are cut off)
      --max-request-rate N     requests one connection may start per second
                               (default 50000; 0: no limit); the one over
                               gets 429 and the connection is closed
      --log-file FILE          append the log there instead of stderr

    key options (any one that opens a key slot is enough):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM) for recipient slots
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY / ENCFS_PASSPHRASE / ENCFS_IDENTITY when no key
      option is given; otherwise a passphrase prompt on a terminal.

    reader options:
    \(ReaderOptions.help)

    remote bundles (URL: http://, https:// or s3://BUCKET/KEY):
    \(RemoteCommandLine.help)

    origin options:
    \(ReaderOptions.originHelp)

    options:
      -h, --help               this text
      --version                print the version and exit

    exit codes: 0 stopped by SIGTERM or SIGINT, 1 runtime failure (the bundle
    does not open, a listener cannot be bound), 2 usage error
    """

    static let parser = ArgumentParser(options: [
        .init(["--listen"], takesValue: true),
        .init(["--listen-any"], takesValue: false),
        .init(["--socket-mode"], takesValue: true),
        .init(["--url-file"], takesValue: true),
        .init(["--json"], takesValue: false),
        .init(["--token-file"], takesValue: true),
        .init(["--no-token"], takesValue: false),
        .init(["--index"], takesValue: true),
        .init(["--no-index"], takesValue: false),
        .init(["--list-directories"], takesValue: false),
        .init(["--cache-control"], takesValue: true),
        .init(["--max-connections"], takesValue: true),
        .init(["--timeout"], takesValue: true),
        .init(["--header-timeout"], takesValue: true),
        .init(["--max-request-rate"], takesValue: true),
        .init(["--log-file"], takesValue: true),
        .init(["--name"], takesValue: true),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ] + KeyOptions.parserOptions + ReaderOptions.parserOptions + RemoteCommandLine.parserOptions
      + AccessOptions.parserOptions.filter { $0.names != ["--enforce-reads"] }
      + LockOptions.parserOptions.filter { $0.names != [LockOptions.controlDirectoryOption] })

    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        ProcessArguments.hideAddresses()
        let diagnostics = Diagnostics(tool: tool)
        let args: ArgumentParser.Result
        switch CommandLineStart.parse(arguments, with: parser, tool: tool, help: help, diagnostics: diagnostics) {
        case .exit(let status): return status
        case .run(let parsed): args = parsed
        }
        var shownBundle: [UInt8]?
        do {
            let plan = try ServePlan(args)
            shownBundle = RemoteCommandLine.shown(plan.bundle)
            let server = try ServeServer.open(plan, args: args)
            shownBundle = nil
            return try server.run(diagnostics: diagnostics)
        } catch {
            diagnostics.report(error, path: shownBundle)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.code(for: error)
        }
    }
}

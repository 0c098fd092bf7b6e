import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-keygen [-o FILE] [--symmetric | --sign] [--force]`.
package enum KeygenCommand {
    static let help = """
    usage: encfs-keygen [-o FILE] [--force]
           encfs-keygen --symmetric [-o FILE] [--force]
           encfs-keygen --sign [-o FILE] [--force]

    Makes an X25519 identity: the private key (PEM PKCS#8) goes to FILE with
    mode 0600, its recipient (public key, PEM) to FILE.pub and to stdout with
    its fingerprint. Give the recipient to `encfs-pack --recipient` (in CI, it
    is not a secret) and keep the identity on the hosts that mount:
    `encfs-mount --identity FILE`. Keys made by `openssl genpkey -algorithm
    X25519` (or RSA, 2048 bits or more) and `openssl pkey -pubout` work too.
    Without -o the private key is written to stdout.

    --symmetric writes a fresh 256-bit key as 64 hex characters (mode 0600),
    for --key-file.

    --sign makes an Ed25519 signing key instead: the private key (PEM PKCS#8)
    goes to FILE with mode 0600, for `encfs-pack --sign-key` (keep it where
    bundles are made, e.g. as a CI secret); its public key (PEM) goes to
    FILE.pub and to stdout with its fingerprint, for `encfs-mount
    --verify-key` on the hosts. Keys made by `openssl genpkey -algorithm
    ed25519` and `openssl pkey -pubout` work too. Without -o the private key
    is written to stdout.

    options:
      -o, --output FILE   where to write the private key
      --symmetric         make a raw key instead of an identity
      --sign              make a signing key instead of an identity
      --force             replace existing files
      -h, --help          this text
      --version           print the version and exit

    exit codes: 0 success, 1 runtime failure (e.g. FILE exists), 2 usage error
    """

    static let parser = ArgumentParser(options: [
        .init(["--output", "-o"], takesValue: true),
        .init(["--symmetric"], takesValue: false),
        .init(["--sign"], takesValue: false),
        .init(["--force"], takesValue: false),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ])

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-keygen")
        let args: ArgumentParser.Result
        switch CommandLineStart.parse(arguments, with: parser, tool: "encfs-keygen", help: help, diagnostics: diagnostics,
                                      validate: { args in
            guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(String(decoding: args.positionals[0], as: UTF8.self))") }
            if args.has("--symmetric"), args.has("--sign") { throw UsageError("--symmetric and --sign exclude each other") }
        }) {
        case .exit(let status): return status
        case .run(let parsed): args = parsed
        }
        let output = args.value("--output")
        let force = args.has("--force")
        do {
            if args.has("--symmetric") {
                let key = try SecureBytes.random(count: SymmetricKey.byteCount)
                let hex = SecureBytes(count: 2 * SymmetricKey.byteCount + 1) { (out: UnsafeMutableRawBufferPointer) in
                    key.withUnsafeBytes { Hex.encode($0, into: out) }
                    out[2 * SymmetricKey.byteCount] = 0x0A
                }
                try hex.withUnsafeBytes { try emit($0, to: output, mode: 0o600, force: force) }
                return ExitCode.success
            }
            if args.has("--sign") {
                let key = try SigningKey.generate()
                try writePair(privatePEM: try key.pemRepresentation, publicPEM: key.publicKey.pemRepresentation,
                              publicName: "verifying key", fingerprint: BundleSignature.fingerprint(of: key.publicKey),
                              output: output, force: force)
                return ExitCode.success
            }
            let identity = try PrivateKey.generateX25519()
            try writePair(privatePEM: try identity.pemPKCS8(), publicPEM: try identity.publicKey.pem(), publicName: "recipient",
                          fingerprint: try KeySlot.hexFingerprint(of: identity.publicKey), output: output, force: force)
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: output)
            return ExitCode.failure
        }
    }

    /// Writes a private key to `output` (mode 0600) and its public key to
    /// `output.pub` (0644) and stdout, or, without `output`, the private key
    /// to stdout and the public key to stderr.
    ///
    /// - Parameters:
    ///   - publicName: what the public key is called in the notes
    ///     ("recipient", "verifying key").
    ///   - fingerprint: shown with the public key.
    /// - Throws: `KeyInputError` for a file that exists (without `force`),
    ///   `BundleError.io` when writing fails; nothing is left half made.
    private static func writePair(privatePEM: SecureBytes, publicPEM: [UInt8], publicName: String, fingerprint: String,
                                  output: [UInt8]?, force: Bool) throws {
        if let output {
            let pubPath = output + Array(".pub".utf8)
            if !force {
                // Refuse before writing either file, so none is half made.
                for path in [output, pubPath] where path.withCString({ access($0, F_OK) }) == 0 {
                    throw KeyInputError("refusing to overwrite an existing file (use --force)", path: path)
                }
            }
            // The public half first: if the private key then cannot be
            // written, the lone .pub is removed again and nothing is left.
            try publicPEM.withUnsafeBytes { try emit($0, to: pubPath, mode: 0o644, force: force) }
            do {
                try privatePEM.withUnsafeBytes { try emit($0, to: output, mode: 0o600, force: force) }
            } catch {
                _ = pubPath.withCString { unlink($0) }
                throw error
            }
            let out = OutputStream()
            out.write(publicPEM)
            out.line("# \(publicName) fingerprint: \(fingerprint)")
        } else {
            try privatePEM.withUnsafeBytes { try emit($0, to: nil, mode: 0o600, force: force) }
            var note = Array("encfs-keygen: \(publicName) (fingerprint \(fingerprint)):\n".utf8) + publicPEM
            if note.last != 0x0A { note.append(0x0A) }
            note.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
        }
    }

    /// Writes `bytes` to `path` atomically with `mode` (or to stdout).
    private static func emit(_ bytes: UnsafeRawBufferPointer, to path: [UInt8]?, mode: mode_t, force: Bool) throws {
        guard let path else {
            try FileDescriptor.Borrowed.standardOutput.writeAll(bytes)
            return
        }
        let file = try AtomicFile(destination: path, mode: mode)
        _ = fchmod(file.file.rawValue, mode)
        try file.file.writeAll(bytes)
        do {
            try file.commit(replacing: force)
        } catch BundleError.io(let code, _, _) where code == EEXIST {
            throw KeyInputError("refusing to overwrite an existing file (use --force)", path: path)
        }
    }
}

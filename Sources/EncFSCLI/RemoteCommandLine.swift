import EncFSCore
import EncFSRemote
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// The options for a bundle given as an `http://` or `https://` address,
/// shared by `encfs-mount` and `encfs-inspect`, and how its secrets reach
/// the mount daemon.
///
/// The address's query string and the `--header-file` lines are secrets:
/// messages name the bundle by ``RemoteLocation/displayName``, and the
/// daemon gets them through a pipe (``secretHandOver(_:options:opened:)``),
/// never argv. Its argv carries the display name and the other options.
package enum RemoteCommandLine {
    package static let cacheDir = "--cache-dir"
    package static let cacheSize = "--cache-size"
    package static let fetchSize = "--fetch-size"
    package static let connections = "--connections"
    package static let prefetch = "--prefetch"
    package static let headerFile = "--header-file"
    package static let netTimeout = "--net-timeout"
    package static let retries = "--retries"
    package static let caFile = "--ca-file"
    package static let s3Endpoint = "--s3-endpoint"
    package static let s3Region = "--s3-region"
    package static let s3PathStyle = "--s3-path-style"
    package static let s3VirtualHosted = "--s3-virtual-hosted"
    package static let awsCredentialsFile = "--aws-credentials-file"
    package static let awsCredentialsCredential = "--aws-credentials-credential"
    package static let mirror = "--mirror"
    package static let prefetchList = "--prefetch-list"
    /// `encfs-mount` only (a long-running process with one operand to
    /// replace); see ``addressFileHelp``.
    package static let addressFile = "--address-file"
    package static let addressFileHelp = """
      --address-file FILE      read the address from FILE (- for standard
                               input; its first line) instead of BUNDLE, so
                               that it never appears in argv
                               (/proc/PID/cmdline); an address given as
                               BUNDLE is hidden from argv at start
    """
    /// In the daemon's argv: its bundle is remote, secrets on fd 5.
    package static let daemonRemote = "--internal-remote"

    package static let parserOptions: [ArgumentParser.Option] = [
        .init([cacheDir], takesValue: true), .init([cacheSize], takesValue: true), .init([fetchSize], takesValue: true),
        .init([connections], takesValue: true), .init([prefetch], takesValue: true), .init([headerFile], takesValue: true),
        .init([netTimeout], takesValue: true), .init([retries], takesValue: true), .init([caFile], takesValue: true),
        .init([s3Endpoint], takesValue: true), .init([s3Region], takesValue: true), .init([s3PathStyle], takesValue: false),
        .init([s3VirtualHosted], takesValue: false), .init([awsCredentialsFile], takesValue: true),
        .init([awsCredentialsCredential], takesValue: true), .init([mirror], takesValue: true),
        .init([prefetchList], takesValue: true),
        .init([daemonRemote], takesValue: false),
    ]

    /// Largest `--address-file`.
    package static let maximumAddressFile = 16 << 10

    /// Largest `--header-file`.
    package static let maximumHeaderFile = 32 << 10

    package static let help = """
    remote bundles (BUNDLE is an http://, https:// or s3://BUCKET/KEY address;
    a presigned URL with its query string works as it is, and is never
    shown or logged):
      --cache-dir DIR          ciphertext cache (default $XDG_CACHE_HOME/encfs
                               or ~/.cache/encfs; as root /var/cache/encfs),
                               one directory per bundle id
      --cache-size SIZE        most bytes cached, e.g. 512M, 4G (default 4G;
                               0: no cache)
      --fetch-size SIZE        bytes per cache file, cut to chunk boundaries
                               (default 4M)
      --connections N          kept-alive connections, 1 … 64 (default 4)
      --prefetch none|index|all
                               index: keep the sealed index in memory
                               (default); none: read it through the cache
                               like content; all: also fetch every byte in
                               the background until the cache is full
      --header-file FILE       extra request headers, one "Name: value" per
                               line (e.g. Authorization), kept out of argv
      --net-timeout SECONDS    how long one read may wait for the server before
                               it fails with EIO (default 60; 0: forever)
      --retries N              attempts after the first within that time
                               (default 10)
      --ca-file FILE           trust these certificate authorities (PEM)
      --mirror URL             another address of the same bundle (repeatable,
                               any scheme BUNDLE may have): reads go to the
                               first healthy one; a failing one is set aside
      --prefetch-list FILE     fetch these files first, in the background,
                               once mounted: paths one per line, or what
                               encfs-ctl MNT access-log --json printed
    s3://BUCKET/KEY bundles (every request signed with AWS Signature V4):
      --s3-endpoint URL        the service (default: AWS's regional endpoint)
      --s3-region REGION       default AWS_REGION, AWS_DEFAULT_REGION, the
                               config file's region, else us-east-1
      --s3-path-style          ENDPOINT/BUCKET/KEY (automatic with
                               --s3-endpoint)
      --s3-virtual-hosted      BUCKET.ENDPOINT/KEY (the default on AWS)
      --aws-credentials-file FILE
                               credentials file (profile AWS_PROFILE or
                               default), read again when it changes; after
                               AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
                               AWS_SESSION_TOKEN and AWS_PROFILE
      --aws-credentials-credential NAME
                               that file as systemd credential NAME
    """

    /// The address in `--address-file` (a file, or `-` for standard input),
    /// or nil when the option is not given.
    ///
    /// - Throws: `CommandError` naming the file (never its contents) when
    ///   it cannot be read or holds no address.
    package static func address(from args: ArgumentParser.Result) throws -> [UInt8]? {
        guard let path = args.value(addressFile) else { return nil }
        let text: SecureBytes
        do {
            if path == Array("-".utf8) {
                // Zero-filled: the address ends at the first NUL after it.
                text = try SecureBytes(count: maximumAddressFile + 1) { (out: UnsafeMutableRawBufferPointer) throws(BundleError) in
                    guard try FileDescriptor.Borrowed(0, path: path).read(into: out) <= maximumAddressFile else {
                        throw BundleError.limitExceeded("more than \(maximumAddressFile) bytes")
                    }
                }
            } else {
                text = try LocalFiles.readSecretFile(path, limit: maximumAddressFile)
            }
        } catch {
            throw CommandError("cannot read \(addressFile)", path: path)
        }
        // One line; surrounding white space (a final newline) dropped.
        let address: [UInt8] = text.withUnsafeBytes { bytes in
            let line = bytes.prefix { $0 != 0 && $0 != UInt8(ascii: "\n") }
            return Array(line.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }.reversed())
        }
        guard isRemote(address) else {
            throw CommandError("\(addressFile) holds no http://, https:// or s3:// address", path: path)
        }
        return address
    }

    /// Whether `bundle` is an address (http, https, s3) rather than a path.
    package static func isRemote(_ bundle: [UInt8]) -> Bool { RemoteLocation.isRemote(bundle) }

    /// `bundle` as messages may show it: an address without its secrets.
    package static func shown(_ bundle: [UInt8]) -> [UInt8] {
        guard isRemote(bundle) else { return bundle }
        return (try? RemoteLocation(bundle))?.displayName ?? Array("(invalid address)".utf8)
    }

    /// Largest `--prefetch-list`.
    package static let maximumPrefetchList = 16 << 20

    /// The files of a `--prefetch-list`: the JSON `encfs-ctl MNT access-log
    /// --json` prints (its `path` and `chunks`), or paths one per line
    /// (empty lines and `#` comments skipped).
    ///
    /// - Throws: `CommandError` naming the file when it cannot be read or
    ///   a JSON list cannot be parsed.
    package static func readPrefetchList(_ path: [UInt8]) throws -> [PrefetchItem] {
        let text: [UInt8]
        do { text = try LocalFiles.readSecretFile(path, limit: maximumPrefetchList).withUnsafeBytes { Array($0) } } catch {
            throw CommandError("cannot read \(prefetchList)", path: path)
        }
        guard text.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == UInt8(ascii: "{") else {
            return text.split(separator: 0x0A).compactMap { line in
                var line = Array(line)
                if line.last == 0x0D { line.removeLast() }
                return line.isEmpty || line.first == UInt8(ascii: "#") ? nil : PrefetchItem(path: line, chunks: [])
            }
        }
        guard let items = AccessLogJSON.items(text) else {
            throw CommandError("\(prefetchList) is not the JSON of encfs-ctl access-log --json", path: path)
        }
        return items
    }

    /// The S3 settings in `args` (endpoint, region, addressing); the
    /// credentials are found later (``resolveS3(_:for:args:)``).
    ///
    /// - Throws: `UsageError` for both addressing flags.
    private static func s3Settings(from args: ArgumentParser.Result) throws -> S3Settings {
        var settings = S3Settings()
        settings.endpoint = args.value(s3Endpoint)
        settings.region = args.value(s3Region).map { String(decoding: $0, as: UTF8.self) }
        switch (args.has(s3PathStyle), args.has(s3VirtualHosted)) {
        case (true, true): throw UsageError("\(s3PathStyle) and \(s3VirtualHosted) exclude each other")
        case (true, false): settings.addressing = .pathStyle
        case (false, true): settings.addressing = .virtualHosted
        case (false, false): break
        }
        return settings
    }

    /// Takes every `AWS_*` variable out of the environment (the secret
    /// ones' bytes overwritten, as `/proc/PID/environ` shows them), so that
    /// no daemon inherits them.
    package static func takeAWSEnvironment() -> AWSCredentialChain.Environment {
        func take(_ name: String) -> SecureBytes? { KeySources.takeEnvironment(name) }
        func plain(_ name: String) -> [UInt8]? { take(name).flatMap { $0.count > 0 ? $0.withUnsafeBytes { Array($0) } : nil } }
        var env = AWSCredentialChain.Environment()
        env.accessKeyID = plain("AWS_ACCESS_KEY_ID")
        env.secretAccessKey = take("AWS_SECRET_ACCESS_KEY").flatMap { $0.count > 0 ? $0 : nil }
        env.sessionToken = take("AWS_SESSION_TOKEN").flatMap { $0.count > 0 ? $0 : nil }
        env.profile = plain("AWS_PROFILE")
        env.sharedCredentialsFile = plain("AWS_SHARED_CREDENTIALS_FILE")
        env.configFile = plain("AWS_CONFIG_FILE")
        env.region = plain("AWS_REGION")
        env.defaultRegion = plain("AWS_DEFAULT_REGION")
        env.endpoint = plain("AWS_ENDPOINT_URL_S3") ?? plain("AWS_ENDPOINT_URL")
        if let home = getenv("HOME"), home.pointee == UInt8(ascii: "/") { env.home = Array(String(cString: home).utf8) }
        // Any other AWS_* variable (AWS_CA_BUNDLE, AWS_ROLE_ARN…) goes too.
        var others: [String] = []
        var entry = environ
        while let variable = entry.pointee {
            if strncmp(variable, "AWS_", 4) == 0, let equals = strchr(variable, Int32(UInt8(ascii: "="))) {
                others.append(String(decoding: UnsafeRawBufferPointer(start: variable, count: equals - variable), as: UTF8.self))
            }
            entry += 1
        }
        others.forEach { _ = take($0) }
        return env
    }

    /// For an `s3://` bundle: the region and the credentials from the
    /// chain (``AWSCredentialChain``), `--aws-credentials-file` or
    /// `--aws-credentials-credential`.
    ///
    /// - Throws: `RemoteError.credentials`, `KeyInputError` (credential).
    package static func resolveS3(_ options: inout RemoteOptions, environment: AWSCredentialChain.Environment,
                          args: ArgumentParser.Result) throws {
        if options.s3.region == nil { options.s3.region = AWSCredentialChain.region(environment) ?? "us-east-1" }
        if options.s3.endpoint == nil { options.s3.endpoint = environment.endpoint }
        var givenFile = args.value(awsCredentialsFile)
        if let name = args.value(awsCredentialsCredential) { givenFile = try ServiceCredentials.path(of: name) }
        options.s3.credentials = try AWSCredentialChain.credentials(environment, givenFile: try givenFile.map(absolutePath))
    }

    /// `path` made absolute (the daemon works from "/" and reads the
    /// credentials file again).
    package static func absolutePath(_ path: [UInt8]) throws -> [UInt8] {
        guard path.first != UInt8(ascii: "/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { throw CommandError("cannot resolve path", path: path) }
        return buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) } + [UInt8(ascii: "/")] + path
    }

    /// The remote settings in `args`, headers read from `--header-file`.
    ///
    /// - Throws: `UsageError` for a value out of range; `CommandError` for a
    ///   header file that cannot be read or parsed (never its contents).
    package static func options(from args: ArgumentParser.Result) throws -> RemoteOptions {
        var options = RemoteOptions()
        options.cacheDirectory = args.value(cacheDir) ?? defaultCacheDirectory()
        options.s3 = try s3Settings(from: args)
        options.mirrors = args.values(mirror)
        if let path = args.value(prefetchList) { options.prefetchList = try readPrefetchList(path) }
        if let text = args.value(cacheSize) {
            guard let size = ReaderOptions.parseSize(text) else { throw UsageError("\(cacheSize) must be a size such as 512M or 4G") }
            options.cacheSize = size
        }
        if let text = args.value(fetchSize) {
            guard let size = ReaderOptions.parseSize(text), size >= 64 << 10, size <= 256 << 20 else {
                throw UsageError("\(fetchSize) must be a size from 64K to 256M")
            }
            options.fetchSize = Int(size)
        }
        options.connections = try number(args.value(connections), in: 1...64, default: options.connections, connections)
        options.netTimeout = try number(args.value(netTimeout), in: 0...86400, default: options.netTimeout, netTimeout)
        options.retries = try number(args.value(retries), in: 0...1000, default: options.retries, retries)
        if let text = args.value(prefetch) {
            guard let value = RemoteOptions.Prefetch(rawValue: String(decoding: text, as: UTF8.self)) else {
                throw UsageError("\(prefetch) must be none, index or all")
            }
            options.prefetch = value
        }
        if let path = args.value(caFile) {
            try checkAuthorities(path)
            options.caFile = path
        }
        if let path = args.value(headerFile) {
            let text: SecureBytes
            do { text = try LocalFiles.readSecretFile(path, limit: maximumHeaderFile) } catch {
                throw CommandError("cannot read header file", path: path)
            }
            do {
                options.headers = try text.withUnsafeBytes { (bytes) throws(RemoteError) in try RemoteOptions.parseHeaders(Array(bytes)) }
            } catch {
                throw CommandError(error.description, path: path)
            }
        }
        return options
    }

    /// Largest `--ca-file`.
    package static let maximumCAFile = 4 << 20

    /// Refuses a `--ca-file` that cannot be read or holds no PEM
    /// certificate here, with the option's name, rather than as a TLS
    /// failure at the first request.
    ///
    /// - Throws: `CommandError` naming the file.
    private static func checkAuthorities(_ path: [UInt8]) throws {
        let text: SecureBytes
        do { text = try LocalFiles.readSecretFile(path, limit: maximumCAFile) } catch {
            throw CommandError("cannot read \(caFile)", path: path)
        }
        let marker = Array("-----BEGIN CERTIFICATE-----".utf8)
        let found = text.withUnsafeBytes { bytes in
            bytes.count >= marker.count && (0...(bytes.count - marker.count)).contains { at in
                marker.indices.allSatisfy { bytes[at + $0] == marker[$0] }
            }
        }
        guard found else { throw CommandError("\(caFile) holds no PEM certificate", path: path) }
    }

    private static func number(_ text: [UInt8]?, in range: ClosedRange<Int>, default value: Int, _ name: String) throws -> Int {
        guard let text else { return value }
        guard let n = Int(String(decoding: text, as: UTF8.self)), range.contains(n) else {
            throw UsageError("\(name) must be a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// `$XDG_CACHE_HOME/encfs`, else `$HOME/.cache/encfs`; for root
    /// `/var/cache/encfs`; nil when none can be found (no cache).
    package static func defaultCacheDirectory() -> [UInt8]? {
        if getuid() == 0 { return Array("/var/cache/encfs".utf8) }
        if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee == UInt8(ascii: "/") {
            return Array(String(cString: xdg).utf8) + Array("/encfs".utf8)
        }
        if let home = getenv("HOME"), home.pointee == UInt8(ascii: "/") {
            return Array(String(cString: home).utf8) + Array("/.cache/encfs".utf8)
        }
        return nil
    }

    /// Opens `bundle`: a local file, or a remote bundle with `options`.
    /// A tool that only reads (inspect) uses the cache when it is free and
    /// goes without it when a mount holds it.
    package static func source(for bundle: [UInt8], options: RemoteOptions?, args: ArgumentParser.Result) throws -> any ByteSource {
        guard isRemote(bundle), var options else { return try FileByteSource(path: bundle) }
        let environment = takeAWSEnvironment()
        if RemoteLocation.isS3(bundle) || options.mirrors.contains(where: RemoteLocation.isS3) {
            try resolveS3(&options, environment: environment, args: args)
        }
        let location = try RemoteLocation(bundle, s3: options.s3)
        do {
            return try RemoteBundleSource(location: location, options: options)
        } catch RemoteError.cache {
            var uncached = options
            uncached.cacheDirectory = nil
            return try RemoteBundleSource(location: location, options: uncached)
        }
    }

    // MARK: - The daemon

    /// The daemon's argv for the non-secret remote settings; the address
    /// and the headers go through the hand-over pipe.
    package static func daemonArguments(_ options: RemoteOptions) -> [[UInt8]] {
        var out: [[UInt8]] = [Array(daemonRemote.utf8)]
        func add(_ name: String, _ value: String) { out += [Array(name.utf8), Array(value.utf8)] }
        if let dir = options.cacheDirectory { out += [Array(cacheDir.utf8), dir] }
        add(cacheSize, String(options.cacheSize))
        add(fetchSize, String(options.fetchSize))
        add(connections, String(options.connections))
        add(prefetch, options.prefetch.rawValue)
        add(netTimeout, String(options.netTimeout))
        add(retries, String(options.retries))
        if let ca = options.caFile { out += [Array(caFile.utf8), ca] }
        if let endpoint = options.s3.endpoint { out += [Array(s3Endpoint.utf8), endpoint] }
        if let region = options.s3.region { add(s3Region, region) }
        switch options.s3.addressing {
        case .pathStyle: out.append(Array(s3PathStyle.utf8))
        case .virtualHosted: out.append(Array(s3VirtualHosted.utf8))
        case .automatic: break
        }
        return out
    }

    /// A pipe whose read end holds the address, the headers and what the
    /// command's opening request pinned (size, ETag, first bytes), so the
    /// daemon makes no request of its own before fetching the index.
    ///
    /// - Throws: `CommandError` when the pipe cannot be made or filled.
    package static func secretHandOver(_ address: [UInt8], options: RemoteOptions, opened: HTTPByteSource) throws -> FileDescriptor {
        var handOver = RemoteHandOver(url: address, headers: options.headers, pinned: opened.pinned)
        if let credentials = options.s3.credentials {
            handOver.credentials = credentials.current().credentials
            handOver.credentialOrigin = credentials.origin
        }
        handOver.mirrors = options.mirrors
        handOver.prefetchList = options.prefetchList ?? []
        var payload = handOver.encoded()
        defer { payload.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        // Close-on-exec, both ends: the daemon gets the read end only as
        // the spawn's dup2 of a copy (MountDaemon.launch) at fd 5; neither
        // end must reach it (or any other program started meanwhile) at
        // its own number: the write end would let it write its own
        // hand-over, and keep the pipe from ever ending.
        guard let (read, write) = try? FileDescriptor.pipe(closeOnExec: true) else {
            throw CommandError("cannot create pipe for the mount daemon")
        }
        // The pipe must hold it all, since nobody reads until the daemon
        // starts: 256 KiB (F_SETPIPE_SZ, not imported) fits the 64 KiB head,
        // the 32 KiB header file at most and an address.
        let setPipeSize: Int32 = 1031
        guard fcntl(write.rawValue, setPipeSize, Int32(256 << 10)) >= payload.count else {
            throw CommandError("cannot hand the address to the mount daemon (pipe too small)")
        }
        do { try payload.withUnsafeBytes { try write.writeAll($0) } } catch {
            throw CommandError("cannot hand the address to the mount daemon")
        }
        return read
    }
}

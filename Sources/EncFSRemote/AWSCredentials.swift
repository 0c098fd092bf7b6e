import CryptCore

/// One set of AWS credentials: an access key id, its secret key and, for
/// a session, its token.
///
/// The secret key and the token are secrets: they live in wiping storage,
/// reach libcurl only (which signs each request with them), and are never
/// shown; `description`-like output names the key id at most.
package struct AWSCredentials: Sendable, Equatable {
    /// The access key id (`AKIA…`, `ASIA…` for a session): not secret.
    package var accessKeyID: [UInt8]
    package var secretAccessKey: SecureBytes
    /// The session token of temporary credentials (`x-amz-security-token`).
    package var sessionToken: SecureBytes?

    package init(accessKeyID: [UInt8], secretAccessKey: SecureBytes, sessionToken: SecureBytes?) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// Reads the credentials of `profile` from the text of an AWS shared
    /// credentials file (`[NAME]` sections) or config file (`[profile
    /// NAME]`, and `[default]`), as the AWS CLI writes them:
    /// `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`.
    ///
    /// - Returns: nil when the profile has no key id and secret key.
    /// - Throws: `RemoteError.credentials` for a profile with one of them
    ///   only (naming the key's name, never a value).
    package static func parse(_ text: UnsafeRawBufferPointer, profile: [UInt8],
                              configFile: Bool) throws(RemoteError) -> AWSCredentials? {
        let values = AWSProfileFile.values(in: text, profile: profile, configFile: configFile)
        let id = values[Array("aws_access_key_id".utf8)]
        let secret = values[Array("aws_secret_access_key".utf8)]
        switch (id, secret) {
        case (nil, nil): return nil
        case (let id?, let secret?) where id.count > 0 && secret.count > 0:
            let token = values[Array("aws_session_token".utf8)].flatMap { $0.count > 0 ? $0 : nil }
            return AWSCredentials(accessKeyID: id.withUnsafeBytes { Array($0) }, secretAccessKey: secret, sessionToken: token)
        default:
            throw .credentials("profile \(String(decoding: profile, as: UTF8.self)) needs both aws_access_key_id and aws_secret_access_key")
        }
    }
}

/// The INI dialect of `~/.aws/credentials` and `~/.aws/config`: sections
/// in brackets, `name = value` lines, `#` and `;` comments.
package enum AWSProfileFile {
    /// The `name = value` pairs of one profile's section, values in wiping
    /// storage (they may be secret keys).
    ///
    /// - Parameter configFile: the config file names a profile's section
    ///   `[profile NAME]` (but `[default]` as it is).
    package static func values(in text: UnsafeRawBufferPointer, profile: [UInt8],
                               configFile: Bool) -> [[UInt8]: SecureBytes] {
        var wanted: [[UInt8]] = configFile ? [Array("profile ".utf8) + profile] : [profile]
        if configFile, profile == Array("default".utf8) { wanted.append(profile) }
        var inSection = false
        var found: [[UInt8]: SecureBytes] = [:]
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count, text[end] != 0x0A { end += 1 }
            let line = trimmed(UnsafeRawBufferPointer(rebasing: text[start..<end]))
            start = end + 1
            guard let first = line.first, first != UInt8(ascii: "#"), first != UInt8(ascii: ";") else { continue }
            if first == UInt8(ascii: "["), line.last == UInt8(ascii: "]") {
                let name = trimmed(UnsafeRawBufferPointer(rebasing: line.dropFirst().dropLast()))
                // `[profile  NAME]` with more spaces is still that profile.
                let normalized = normalizedSection(Array(name))
                inSection = wanted.contains(normalized)
                continue
            }
            guard inSection, let equals = line.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let key = Array(trimmed(UnsafeRawBufferPointer(rebasing: line[line.startIndex..<equals])))
            let value = trimmed(UnsafeRawBufferPointer(rebasing: line[(equals + 1)...]))
            found[key.map { $0 | ($0 >= 0x41 && $0 <= 0x5A ? 0x20 : 0) }] = SecureBytes(copying: UnsafeRawBufferPointer(rebasing: value))
        }
        return found
    }

    private static func normalizedSection(_ name: [UInt8]) -> [UInt8] {
        let prefix = Array("profile".utf8)
        guard name.starts(with: prefix), name.count > prefix.count, name[prefix.count] == 0x20 || name[prefix.count] == 0x09 else {
            return name
        }
        return prefix + [0x20] + Array(name[prefix.count...].drop { $0 == 0x20 || $0 == 0x09 })
    }

    /// `bytes` without surrounding spaces, tabs and a CR.
    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> Slice<UnsafeRawBufferPointer> {
        var lower = 0
        var upper = bytes.count
        func space(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D }
        while lower < upper, space(bytes[lower]) { lower += 1 }
        while upper > lower, space(bytes[upper - 1]) { upper -= 1 }
        return bytes[lower..<upper]
    }
}

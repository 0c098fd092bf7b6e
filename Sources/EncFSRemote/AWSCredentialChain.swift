import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Finds the credentials and region of an `s3://` bundle, in the order of
/// issue 30 (docs/CLI.md):
///
/// 1. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (`AWS_SESSION_TOKEN`);
/// 2. with `AWS_PROFILE` set: that profile in the shared credentials file
///    (`AWS_SHARED_CREDENTIALS_FILE`, default `~/.aws/credentials`), then in
///    the config file (`AWS_CONFIG_FILE`, default `~/.aws/config`);
/// 3. a file given on the command line (`--aws-credentials-file`, its fstab
///    spelling, or the systemd credential `--aws-credentials-credential`),
///    profile `AWS_PROFILE` or `default`;
/// 4. the `default` profile of the shared credentials and config files.
///
/// Given files come after `AWS_PROFILE` as the issue orders them; the
/// `default` profile comes last so that a file named on the command line
/// wins over whatever root's home holds.
package enum AWSCredentialChain {
    /// The variables the chain reads. The mount command takes them out of
    /// its environment (the secret ones wiped) so that its daemon never
    /// inherits them; the library reads them as they are.
    package struct Environment: Sendable {
        package var accessKeyID: [UInt8]?
        package var secretAccessKey: SecureBytes?
        package var sessionToken: SecureBytes?
        package var profile: [UInt8]?
        package var sharedCredentialsFile: [UInt8]?
        package var configFile: [UInt8]?
        package var region: [UInt8]?
        package var defaultRegion: [UInt8]?
        package var home: [UInt8]?
        /// `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL` (the SDKs'
        /// variables for a custom endpoint: MinIO, Ceph, a test server).
        package var endpoint: [UInt8]?
        package init() {}

        /// Every `AWS_*` variable this chain knows.
        package static let names = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                                    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                                    "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]

        /// The process's environment, read and left as it is (the library).
        package static func current() -> Environment {
            func value(_ name: String) -> [UInt8]? {
                guard let raw = getenv(name), raw.pointee != 0 else { return nil }
                return Array(UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
            }
            var env = Environment()
            env.accessKeyID = value("AWS_ACCESS_KEY_ID")
            env.secretAccessKey = value("AWS_SECRET_ACCESS_KEY").map { SecureBytes(copying: $0) }
            env.sessionToken = value("AWS_SESSION_TOKEN").map { SecureBytes(copying: $0) }
            env.profile = value("AWS_PROFILE")
            env.sharedCredentialsFile = value("AWS_SHARED_CREDENTIALS_FILE")
            env.configFile = value("AWS_CONFIG_FILE")
            env.region = value("AWS_REGION")
            env.defaultRegion = value("AWS_DEFAULT_REGION")
            env.home = value("HOME")
            env.endpoint = value("AWS_ENDPOINT_URL_S3") ?? value("AWS_ENDPOINT_URL")
            return env
        }

        var credentialsPath: [UInt8]? { sharedCredentialsFile ?? home.map { $0 + Array("/.aws/credentials".utf8) } }
        var configPath: [UInt8]? { configFile ?? home.map { $0 + Array("/.aws/config".utf8) } }
    }

    /// The credentials to sign with.
    ///
    /// - Parameter givenFile: `--aws-credentials-file` (or the systemd
    ///   credential's path).
    /// - Throws: `RemoteError.credentials` when none are found, or a file
    ///   that is named cannot be read.
    package static func credentials(_ env: Environment, givenFile: [UInt8]?) throws(RemoteError) -> AWSCredentialSource {
        if let id = env.accessKeyID, let secret = env.secretAccessKey {
            return AWSCredentialSource(fixed: AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: env.sessionToken))
        }
        let defaultProfile = Array("default".utf8)
        if let profile = env.profile, let found = try inSharedFiles(env, profile: profile) { return found }
        if let givenFile { return try AWSCredentialSource(file: givenFile, profile: env.profile ?? defaultProfile, configFile: false) }
        if env.profile == nil, let found = try inSharedFiles(env, profile: defaultProfile) { return found }
        throw .credentials("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
                           + "or give --aws-credentials-file")
    }

    private static func inSharedFiles(_ env: Environment, profile: [UInt8]) throws(RemoteError) -> AWSCredentialSource? {
        for (path, isConfig) in [(env.credentialsPath, false), (env.configPath, true)] {
            guard let path, AWSCredentialSource.stamp(of: path) != nil else { continue }
            if let source = try? AWSCredentialSource(file: path, profile: profile, configFile: isConfig) { return source }
        }
        return nil
    }

    /// The region when `--s3-region` is not given: `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`, the profile's `region` in the config file, or
    /// nil.
    package static func region(_ env: Environment) -> String? {
        if let region = env.region ?? env.defaultRegion { return String(decoding: region, as: UTF8.self) }
        guard let path = env.configPath, let text = try? LocalFiles.readSecretFile(path, limit: AWSCredentialSource.maximumFile) else { return nil }
        let values = text.withUnsafeBytes {
            AWSProfileFile.values(in: $0, profile: env.profile ?? Array("default".utf8), configFile: true)
        }
        return values[Array("region".utf8)].map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
    }
}

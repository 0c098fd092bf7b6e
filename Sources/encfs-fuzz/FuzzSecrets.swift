import CryptCore
import EncFSCore

/// The fixed secrets every fuzz target unlocks with, and the seed corpus is
/// packed with. They are public test values, not secrets: a bundle made
/// with them protects nothing.
enum FuzzSecrets {
    /// The raw key: bytes 0xA5, 0xA4, … (i XOR 0xA5).
    static let rawKey: SymmetricKey = {
        let bytes = (0..<SymmetricKey.byteCount).map { UInt8($0) ^ 0xA5 }
        guard let key = try? bytes.withUnsafeBytes({ try SymmetricKey(copying: $0) }) else {
            preconditionFailure("internal error: a 32-byte key was refused")
        }
        return key
    }()

    /// The passphrase.
    static let passphrase = SecureBytes(copying: Array("encfs fuzz passphrase".utf8))

    /// scrypt for seed bundles: N = 2^10, r = 8, p = 1 (1 MiB, about a
    /// millisecond), so unlocking a seed costs little under the fuzzer.
    static let cheapScrypt = Scrypt.Parameters(logN: 10, r: 8, p: 1)

    /// The X25519 identity (PKCS#8 PEM, made by `openssl genpkey -algorithm X25519`).
    static let x25519Identity = identity("""
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VuBCIEIMCQv8ys/EfzHHBs5W8tLZR+pK6JcTSO53LKVeozggdi
-----END PRIVATE KEY-----
""")

    /// The RSA-2048 identity (PKCS#8 PEM, made by `openssl genpkey -algorithm RSA`).
    static let rsaIdentity = identity("""
-----BEGIN PRIVATE KEY-----
MIIEvwIBADANBgkqhkiG9w0BAQEFAASCBKkwggSlAgEAAoIBAQC2tb35IUNOh5Ph
ixvcFX07lCoyassRdb+POvmFLCzjzD7SEbYS5thTE9mvdsgtXdaeTDmTXid+R2bN
irFS8aTtq5dXmjH6cZOkqRH48jmXg5T+8/AksiNFX8wzQVvTXDx+bG6brHPAJFrq
c2g7sWi0xibn2jRJEFG0LGKcDpKnQsiaL66EKSoXuATV6zePvYfuGzj6+wq/WIcq
n+vVHQKol586lgMzYWTyrywqDO0VkS+jOw++kgXUdWuuUO9URTgn7OoCkiU5dO3T
4VWgQ/0uLew+CFW11g1aYKhIZ19aexYNCrbZJ+l//Nb5F22lmeApCQFc88YfgraZ
l6619bTPAgMBAAECggEACaj4P1jD3z4J0o3xTiSQt3qw9HNzAxxPoXoDwUfBo9Wj
qKWpE7zCyTmuc7l7AfMJKttq2+DJg8Kwq8Nedr0x9CLzYH1VkSE6JiWOPrRH2Tvq
v8QT+Uy10rAq8rbM7RLeW+zNuEtY31rMt8KcSzOpDo2/dtixlP9Y4obKO+gFVvR5
DmqcqRfMFp68kD+Xa5c+D2EQh+ef9ZegZ3pQe4t9C8dymJg+UnbGkZxmU+f1/FV6
6nInG2AsnMyzKbvghzGw82wOyj4m+eJWmw0AQtZVSMLFvMyBCAk7xbF3r4U7OIbH
lWdvjZHZSkEg8vb9XoZb5l3Tvhu7vAeUd9kBAQRCMQKBgQDmZ6pUDi5HguXY2APi
aBr2ebWSNO8V7pmC6aCYzpXSsefHvOLHZJf2u0r+b4fDkCmy3qdmlqjNpK2WeQ4K
kdDIsIUaELfdFNc3mtpbF6rkNBud7YtLN+G1gaAq2KM200RAdvBfanOB8ldsrWh9
HjhzNOMR/2ClAVdR5VezZVxaFwKBgQDLAbWqkgVvz/BzJBbKBaykUozQvZzZKumS
nb1Z1UBKio+/2IM3eGl0sHxXq7j2E+M4gbV1LZRBpTq4u0eaSBcvn9FyiT2QBvde
M3D5zoUj+m/NpOrXeUfFDJlg601zF7oKQBprKI+yF6BNZqeZwPRYSYBumDOcql+q
MfYvU3YGCQKBgQDdNUAx7V9/ZuxYEaVBFSR16Ypq8gltrCOUrctzijwMCqR2fyHX
v/uqdk1dFSVqnBl80wozk4hDz8ydgGH7wd2LIPbZfJ2aU+0BRNpJxOJcsK6nJK6s
q903D1oAaPfiplmL7uV/Jkv5wfsvqxl7rq0R5v/vgpl+Mlhsl11pLnLJRwKBgQCu
YCuR9pfg8XaTEL7ajYE8LQR0EUt3Z1r267PIRFtTLC5KFkqwDShYaXiFPiZEidS1
pwUdQCeHM8x6/bOFnML9z4PzpFtTKgi1y+4RRgorW2VJ+Y0XxT+WzTm6fKQsZocR
YvrObSrxSUYS9kik04+PfqNpXCeJPPerk/rpsAFDMQKBgQDcKhFlJC32cSkbLfFH
sB6mCDZ7SprRmxgQIlaV1atzvl/iOlscoupYmwTDl548jXnpzf9RfpRmzXHB9Iyx
8lGk9y3MFvMU6bWEiIbgrH5FbT2/Bk/fAZBwgC2MkoymKfvUV2CjMB5sTWZOXtat
cC7u9HAWmSxjELSN/CqohvhgJw==
-----END PRIVATE KEY-----
""")

    /// The signing key of signed seeds (PKCS#8 PEM, made by `openssl
    /// genpkey -algorithm ed25519`).
    static let signingKey: SigningKey = {
        let pem = """
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEILU6PbJOIC8MvstTHSAU+pqabDHPk64ATO0PL/P2f1XU
-----END PRIVATE KEY-----
"""
        guard let key = try? Array(pem.utf8).withUnsafeBytes({ try SigningKey(pemRepresentation: $0) }) else {
            preconditionFailure("internal error: the built-in fuzz signing key was refused")
        }
        return key
    }()

    /// What the targets require when they open a signed input too: a
    /// signature by ``signingKey``.
    static let origin = OriginPolicy(signers: [signingKey.publicKey])

    /// Every secret, in the order `BundleHeader.unlock` would get them from
    /// the command line.
    /// Makes every key now, before the first input, so the secure heap and
    /// OpenSSL's other process-lifetime state exist before the harness
    /// registers the heap with LeakSanitizer and the first leak check.
    static func prepare() {
        _ = (rawKey, x25519Identity, rsaIdentity, signingKey, origin)
    }

    static var allMaterials: [KeyMaterial] {
        [.rawKey(rawKey), .identity(x25519Identity), .identity(rsaIdentity), .passphrase(passphrase)]
    }

    private static func identity(_ pem: String) -> PrivateKey {
        guard let key = try? Array(pem.utf8).withUnsafeBytes({ try PrivateKey(pem: $0) }) else {
            preconditionFailure("internal error: a built-in fuzz identity was refused")
        }
        return key
    }
}

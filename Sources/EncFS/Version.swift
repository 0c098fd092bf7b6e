public enum EncFSVersion { public static let string = "0.1.0" }

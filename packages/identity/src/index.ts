export { Authenticator, ApiKeySchema, JwtIssuerSchema, type ApiKey, type JwtIssuer, type AuthResult, type AuthFailure } from "./authenticator.js";

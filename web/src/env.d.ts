// esbuild bundles imported CSS into app-HASH.css.
declare module "*.css";
